package actions

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// CgroupFinder finds members in a grant's own cgroup: the daemon made it,
// put the grant's root in it at clone (CLONE_INTO_CGROUP), and only root
// may move processes in or out, so every process in cgroup.procs is a
// member, whatever its parent link says. The pids are bound first, then
// cgroup.procs is read again, once, while their handles are alive: a pid
// reissued to a process outside the cgroup between the two reads is not
// taken (nor one that exited by then).
type CgroupFinder struct {
	Dir string
}

// Name implements Finder.
func (f *CgroupFinder) Name() string { return "grant cgroup" }

// Find implements Finder.
func (f *CgroupFinder) Find(members []*pidfd.Handle, b Budget) ([]*pidfd.Handle, []Member, error) {
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
	have := make(map[int32]bool, len(members))
	for _, h := range members {
		have[h.Pid()] = true
	}
	var bound []*pidfd.Handle
	var unproven []Member
	spent, short := false, false
	for _, pid := range pids {
		if have[pid] {
			continue
		}
		if spent || !take(b) {
			spent = true
			unproven = append(unproven, OverBudget(pid, token.Token{}))
			continue
		}
		h, err := pidfd.Open(pid, boot)
		if err != nil {
			give(b, 1)
			short = short || pidfd.Short(err)
			if !errors.Is(err, pidfd.ErrGone) {
				unproven = append(unproven, Member{Pid: pid, Reason: "in the grant's cgroup but cannot be bound: " + err.Error()})
			}
			continue
		}
		bound = append(bound, h)
	}
	if len(bound) == 0 {
		return nil, unproven, lackErr(spent, short)
	}
	again, err := CgroupProcs(f.Dir)
	in := make(map[int32]bool, len(again))
	for _, pid := range again {
		in[pid] = true
	}
	found := bound[:0]
	for _, h := range bound {
		if err != nil || !in[h.Pid()] || h.Exited() {
			h.Close()
			give(b, 1)
			continue
		}
		found = append(found, h)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return found, unproven, errors.Join(err, lackErr(spent, short))
	}
	return found, unproven, lackErr(spent, short)
}

// lackErr is ErrBudget when spent, ErrShort when short, both joined when
// both, else nil.
func lackErr(spent, short bool) error {
	switch {
	case spent && short:
		return errors.Join(ErrBudget, ErrShort)
	case spent:
		return ErrBudget
	case short:
		return ErrShort
	}
	return nil
}

// CgroupProcs lists the pids in dir/cgroup.procs.
func CgroupProcs(dir string) ([]int32, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	pids, err := ParseCgroupProcs(b)
	if err != nil {
		return nil, fmt.Errorf("%s/cgroup.procs: %w", dir, err)
	}
	return pids, nil
}

// ParseCgroupProcs parses the content of a cgroup.procs file: one pid per
// line. Anything but a positive pid makes the whole list malformed
// (procfs.ErrMalformed): a list with a pid left out would let a teardown
// report a cgroup empty that is not.
func ParseCgroupProcs(b []byte) ([]int32, error) {
	var out []int32
	for _, f := range bytes.Fields(b) {
		v, err := strconv.ParseInt(string(f), 10, 32)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad pid %q: %w", f, procfs.ErrMalformed)
		}
		out = append(out, int32(v))
	}
	return out, nil
}
