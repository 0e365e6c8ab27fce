package actions

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// protection is the set of pids a teardown never signals, found when the
// Teardown is made: pid 1, this process, every ancestor of this process
// (signalling the daemon's parent chain stops the daemon, or the shell or
// service manager that runs it), and any the caller adds with their
// ancestors.
type protection struct {
	pids []int32
}

func protectedSet(extra []int32) protection {
	p := protection{pids: []int32{1}}
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	for _, start := range append([]int32{int32(os.Getpid())}, extra...) {
		for pid := start; pid > 1 && len(p.pids) < 4096 && !slices.Contains(p.pids, pid); pid = st.PPid {
			p.pids = append(p.pids, pid)
			if r.ReadStat(pid, &st) != nil {
				break
			}
		}
	}
	return p
}

// Protected reports whether pid is one no teardown signals whatever the
// caller adds: pid 1, this process or one of its ancestors (read now).
func Protected(pid int32) bool { return slices.Contains(protectedSet(nil).pids, pid) }

// refuse says why h must not be signalled, if it must not: a protected pid,
// the init of a pid namespace that holds any process not proven a member
// (its death kills every process in that namespace), or a process the
// principal could not signal itself. members are the tree's bound members
// so far. Each check reads /proc after the handle was bound and confirms
// the handle still names a live process afterwards, so what was read is
// the bound process's.
//
// held is set for a refusal that names a member the claim still holds,
// which a later teardown may be allowed to signal: the init of a pid
// namespace that holds a process that is no member (the user's own, or
// root's, entered with nsenter). The outcome is then Partial.
func (t *Teardown) refuse(h *pidfd.Handle, members []*pidfd.Handle) (why string, refused, held bool) {
	if slices.Contains(t.protect.pids, h.Pid()) {
		return "protected: init, the supervisor or one of its ancestors", true, false
	}
	if why, ok := t.principalRefuses(h.Pid()); ok && !h.Exited() {
		return why, true, false
	}
	if isNSInit(h.Pid()) {
		if why, ok := t.namespaceRefuses(h, members); ok && !h.Exited() {
			return why, true, true
		}
	}
	return "", false, false
}

// isNSInit reports whether pid is the init of a pid namespace other than
// the daemon's (pid 1 there).
func isNSInit(pid int32) bool {
	ns, err := procfs.NSpid("/proc", pid)
	return err == nil && len(ns) > 1 && ns[len(ns)-1] == 1
}

// principalRefuses applies the kernel's kill rule for the principal: its
// uid must be the target's real or saved uid. Capabilities a process holds
// inside a user namespace are not considered.
func (t *Teardown) principalRefuses(pid int32) (string, bool) {
	p := t.opts.Principal
	if p == nil || *p == 0 {
		return "", false
	}
	ids, err := procfs.ReadUIDs("/proc", pid)
	switch {
	case err != nil:
		return "owner unreadable: " + err.Error(), true
	case ids.Real != *p && ids.Saved != *p:
		return fmt.Sprintf("belongs to uid %d (real), %d (saved): uid %d may not signal it", ids.Real, ids.Saved, *p), true
	}
	return "", false
}

// namespaceRefuses decides for h, the init of a pid namespace: signalling
// it is a kill of every process in that namespace and in the namespaces
// nested in it, so it is allowed only when each of them is a member the
// finders prove (from h and the members so far) and the principal may
// signal.
func (t *Teardown) namespaceRefuses(h *pidfd.Handle, members []*pidfd.Handle) (string, bool) {
	const why = "the init of a pid namespace that holds processes not proven members: signalling it would kill them"
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", h.Pid()))
	if err != nil {
		return "the init of a pid namespace whose members cannot be read: " + err.Error(), true
	}
	var nsStat unix.Stat_t
	depth, err := procfs.NSpid("/proc", h.Pid())
	if err == nil {
		err = unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", h.Pid()), &nsStat)
	}
	if err != nil {
		return "the init of a pid namespace whose members cannot be read: " + err.Error(), true
	}
	pids, err := procfs.Pids("/proc")
	if err != nil {
		return "the init of a pid namespace whose members cannot be listed: " + err.Error(), true
	}
	proven := map[int32]bool{h.Pid(): true}
	for _, m := range members {
		proven[m.Pid()] = true
	}
	from := append([]*pidfd.Handle{h}, members...)
	for _, f := range t.finders {
		// Charged to the teardown's budget while they are open: a member
		// left unbound is not proven, and the init is refused.
		found, _, _ := f.Find(from, t.opts.Budget)
		for _, fh := range found {
			proven[fh.Pid()] = true
			fh.Close()
		}
		give(t.opts.Budget, len(found))
	}
	for _, pid := range pids {
		if pid == h.Pid() {
			continue
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err != nil {
			continue // gone
		}
		if link != ns {
			// The init's death kills the namespaces nested in its own
			// too: a process in one of them counts as inside.
			in, err := nestedIn(pid, len(depth), nsStat.Ino)
			switch {
			case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ESRCH):
				return "the init of a pid namespace whose nested namespaces cannot be read: " + err.Error(), true
			case !in:
				continue
			}
		}
		if !proven[pid] {
			// A process whose every thread has exited (a member killed,
			// not yet reaped by the init) cannot die again. Asked of a
			// pidfd, not of /proc's state: a main thread that exited
			// shows a zombie there while the other threads run (a
			// review's live process, so passed over, died with the
			// init).
			if exitedGroup(pid) {
				continue
			}
			return why + fmt.Sprintf(" (pid %d)", pid), true
		}
		if reason, ok := t.principalRefuses(pid); ok {
			return "the init of a pid namespace holding a process the principal may not signal: " + reason, true
		}
	}
	return "", false
}
