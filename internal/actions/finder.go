package actions

import (
	"errors"
	"os"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// ProcFinder finds descendants through today's parent links in /proc. A
// process counts as a member only when its parent, read after binding a
// pidfd to it, is a member that is still alive afterwards, and that parent
// is not the init of a pid namespace (which adopts strangers). It cannot see a
// descendant whose parent exited (the kernel reparents it to init or a
// subreaper): observed lineage (the lineage graph) can.
type ProcFinder struct {
	Root string // "/proc" when empty
	Boot procfs.BootID
}

// Name implements Finder.
func (f *ProcFinder) Name() string { return "/proc ancestry" }

// Find implements Finder.
func (f *ProcFinder) Find(members []*pidfd.Handle) ([]*pidfd.Handle, []Member, error) {
	root := f.Root
	if root == "" {
		root = "/proc"
	}
	byPid := make(map[int32]*pidfd.Handle, len(members))
	for _, h := range members {
		byPid[h.Pid()] = h
	}
	pids, err := procfs.Pids(root)
	if err != nil {
		return nil, nil, err
	}
	r := procfs.NewReader(root)
	var st procfs.Stat
	var found []*pidfd.Handle
	var unproven []Member
	nsInit := map[int32]bool{}
	for changed := true; changed; {
		changed = false
		for _, pid := range pids {
			if _, ok := byPid[pid]; ok {
				continue
			}
			if err := r.ReadStat(pid, &st); err != nil {
				continue
			}
			parent, ok := byPid[st.PPid]
			if !ok {
				continue
			}
			// The init of a pid namespace adopts the orphans of its
			// namespace, and anything entered into it (setns) whose
			// parent exits: being its child proves no birth.
			if isInit, known := nsInit[st.PPid]; !known {
				ns, err := procfs.NSpid(root, st.PPid)
				isInit = err != nil || len(ns) > 1 && ns[len(ns)-1] == 1
				nsInit[st.PPid] = isInit
				if isInit {
					continue
				}
			} else if isInit {
				continue
			}
			h, err := pidfd.Open(pid, f.Boot)
			if err != nil {
				if !errors.Is(err, pidfd.ErrGone) && !errors.Is(err, os.ErrNotExist) {
					unproven = append(unproven, Member{Pid: pid, Token: tokenOf(f.Boot, &st), Reason: "child of a member but cannot be bound: " + err.Error()})
				}
				continue
			}
			// The stat read through the binding names the parent; the parent
			// still alive afterwards means that pid was our member throughout.
			if h.Stat().PPid != parent.Pid() || parent.Exited() {
				h.Close()
				continue
			}
			byPid[pid] = h
			found = append(found, h)
			changed = true
		}
	}
	return found, unproven, nil
}

func tokenOf(boot procfs.BootID, st *procfs.Stat) token.Token {
	return token.Token{Boot: boot, Start: st.StartTime, Prec: token.Ticks}
}

// groupMembers lists the live processes whose process group is pgid.
func groupMembers(pgid int32) []Member {
	pids, err := procfs.Pids("/proc")
	if err != nil {
		return nil
	}
	boot, _ := procfs.ReadBootID("/proc")
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	var out []Member
	for _, pid := range pids {
		if r.ReadStat(pid, &st) == nil && st.PGrp == pgid && !st.Zombie() {
			out = append(out, Member{Pid: pid, Token: tokenOf(boot, &st), Reason: "in the process group of a gone leader: not provably a member"})
		}
	}
	return out
}
