package actions

import (
	"fmt"
	"os"
	"slices"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// protection is the set of pids a teardown never signals, found when the
// Teardown is made: pid 1, this process, every ancestor of this process
// (signalling the daemon's parent chain stops the daemon, or the shell or
// service manager that runs it), and any the caller adds.
type protection struct {
	pids []int32
}

func protectedSet(extra []int32) protection {
	p := protection{pids: append([]int32{1}, extra...)}
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	for pid := int32(os.Getpid()); pid > 1 && len(p.pids) < 4096; pid = st.PPid {
		p.pids = append(p.pids, pid)
		if r.ReadStat(pid, &st) != nil {
			break
		}
	}
	return p
}

// refuse says why h must not be signalled, if it must not: a protected pid,
// the init of a pid namespace other than ours (its death kills every
// process in that namespace, members or not), or a process the principal
// could not signal itself. Each check reads /proc after the handle was
// bound and confirms the handle still names a live process afterwards, so
// what was read is the bound process's.
func (t *Teardown) refuse(h *pidfd.Handle) (string, bool) {
	if slices.Contains(t.protect.pids, h.Pid()) {
		return "protected: init, the supervisor or one of its ancestors", true
	}
	if ns, err := procfs.NSpid("/proc", h.Pid()); err == nil && len(ns) > 1 && ns[len(ns)-1] == 1 {
		return "the init of a pid namespace (pid 1 there): signalling it kills every process in that namespace", true
	}
	if p := t.opts.Principal; p != nil && *p != 0 {
		ids, err := procfs.ReadUIDs("/proc", h.Pid())
		switch {
		case h.Exited():
			return "", false // gone: nothing will be signalled anyway
		case err != nil:
			return "owner unreadable: " + err.Error(), true
		case ids.Real != *p && ids.Saved != *p:
			return fmt.Sprintf("belongs to uid %d (real), %d (saved): uid %d may not signal it", ids.Real, ids.Saved, *p), true
		}
	}
	return "", false
}
