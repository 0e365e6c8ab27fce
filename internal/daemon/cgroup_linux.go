package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// cgroupBase is the directory under which grants get their cgroups, or the
// reason there is none.
type cgroupBase struct {
	dir    string
	reason string
}

func (c cgroupBase) describe() string {
	if c.dir != "" {
		return c.dir
	}
	return "none (" + c.reason + ")"
}

// findCgroupBase decides where grant cgroups go: for "auto", a
// "supervisor" directory beside the daemon, under its own cgroup v2 group
// (a delegated subtree under systemd), created if needed and probed for
// writability.
func findCgroupBase(setting string) cgroupBase {
	if setting == "off" {
		return cgroupBase{reason: "disabled by configuration"}
	}
	dir := setting
	if setting == "auto" || setting == "" {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return cgroupBase{reason: "reading mountinfo: " + err.Error()}
		}
		mnt, ok := procfs.Cgroup2Mount(mi)
		if !ok {
			return cgroupBase{reason: "no cgroup2 mount in /proc/self/mountinfo"}
		}
		own := "/"
		if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
			if p, ok := procfs.Cgroup2Path(b); ok {
				own = p
			}
		}
		dir = filepath.Join(mnt, own, "supervisor")
	}
	// Its claims' names and their processes are root's to list: under
	// hidepid another user's pids were read in their cgroup.procs.
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return cgroupBase{reason: "cannot create " + dir + ": " + err.Error()}
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return cgroupBase{reason: "cannot restrict " + dir + ": " + err.Error()}
	}
	probe := filepath.Join(dir, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return cgroupBase{reason: "not writable: " + err.Error()}
	}
	os.Remove(probe)
	return cgroupBase{dir: dir}
}

// create makes the cgroup of a grant and opens it for CLONE_INTO_CGROUP.
func (c cgroupBase) create(id string) (string, int, error) {
	if c.dir == "" {
		return "", -1, errors.New(c.reason)
	}
	p := filepath.Join(c.dir, id)
	if err := os.Mkdir(p, 0o700); err != nil {
		return "", -1, err
	}
	fd, err := unix.Open(p, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(p)
		return "", -1, err
	}
	return p, fd, nil
}

// removeCgroup removes a grant's cgroup once it is empty, waiting briefly
// for exiting members to leave it.
func removeCgroup(p string) {
	if p == "" {
		return
	}
	for i := 0; i < 20; i++ {
		err := os.Remove(p)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inCgroup reports whether pid is in the cgroup whose path under the mount
// ends with rel (read from /proc/PID/cgroup).
func inCgroup(pid int32, cgPath string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	own, ok := procfs.Cgroup2Path(b)
	return ok && own != "/" && strings.HasSuffix(cgPath, own)
}

// bindCgroup binds every process of a grant's cgroup. Membership is proven
// by the cgroup (the daemon created it and started the root in it), read
// again after each pidfd is bound, so a pid reissued to a stranger between
// the list and the bind is not taken.
func bindCgroup(p string, boot procfs.BootID, skip map[int32]bool) []*pidfd.Handle {
	pids, err := actions.CgroupProcs(p)
	if err != nil {
		return nil
	}
	var out []*pidfd.Handle
	for _, pid := range pids {
		if skip[pid] {
			continue
		}
		h, err := pidfd.Open(pid, boot)
		if err != nil {
			continue
		}
		if h.Zombie() || !inCgroup(pid, p) || h.Exited() {
			h.Close()
			continue
		}
		out = append(out, h)
	}
	return out
}
