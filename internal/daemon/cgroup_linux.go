package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// cgroup2Mount finds the cgroup v2 mount point in a mountinfo file.
func cgroup2Mount(mountinfo []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		post := strings.Fields(line[sep+3:])
		pre := strings.Fields(line[:sep])
		if len(post) >= 1 && post[0] == "cgroup2" && len(pre) >= 5 {
			return unescapeMount(pre[4]), true
		}
	}
	return "", false
}

// unescapeMount undoes the octal escapes of mountinfo (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup returns the process's cgroup v2 path from /proc/self/cgroup
// ("0::/path").
func ownCgroup(b []byte) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest, true
		}
	}
	return "", false
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
		mnt, ok := cgroup2Mount(mi)
		if !ok {
			return cgroupBase{reason: "no cgroup2 mount in /proc/self/mountinfo"}
		}
		own := "/"
		if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
			if p, ok := ownCgroup(b); ok {
				own = p
			}
		}
		dir = filepath.Join(mnt, own, "supervisor")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cgroupBase{reason: "cannot create " + dir + ": " + err.Error()}
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
	if err := os.Mkdir(p, 0o755); err != nil {
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
	own, ok := ownCgroup(b)
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
