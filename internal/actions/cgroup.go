package actions

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// CgroupFinder finds members in a grant's own cgroup: the daemon made it,
// put the grant's root in it at clone (CLONE_INTO_CGROUP), and only root
// may move processes in or out, so every process in cgroup.procs is a
// member, whatever its parent link says. A pid is bound first and then
// found in cgroup.procs again while its handle is alive: a pid reissued to
// a process outside the cgroup between the two reads is not taken.
type CgroupFinder struct {
	Dir string
}

// Name implements Finder.
func (f *CgroupFinder) Name() string { return "grant cgroup" }

// Find implements Finder.
func (f *CgroupFinder) Find(members []*pidfd.Handle) ([]*pidfd.Handle, []Member, error) {
	pids, err := CgroupProcs(f.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil // removed: nothing left in it
		}
		return nil, nil, err
	}
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		return nil, nil, err
	}
	var found []*pidfd.Handle
	var unproven []Member
	for _, pid := range pids {
		if slices.ContainsFunc(members, func(h *pidfd.Handle) bool { return h.Pid() == pid }) {
			continue
		}
		h, err := pidfd.Open(pid, boot)
		if err != nil {
			if !errors.Is(err, pidfd.ErrGone) {
				unproven = append(unproven, Member{Pid: pid, Reason: "in the grant's cgroup but cannot be bound: " + err.Error()})
			}
			continue
		}
		again, err := CgroupProcs(f.Dir)
		if err != nil || !slices.Contains(again, pid) || h.Exited() {
			h.Close()
			continue
		}
		found = append(found, h)
	}
	return found, unproven, nil
}

// CgroupProcs lists the pids in dir/cgroup.procs.
func CgroupProcs(dir string) ([]int32, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, f := range bytes.Fields(b) {
		v, err := strconv.ParseInt(string(f), 10, 32)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s/cgroup.procs: bad pid %q", dir, f)
		}
		out = append(out, int32(v))
	}
	return out, nil
}
