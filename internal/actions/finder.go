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
func (f *ProcFinder) Find(members []*pidfd.Handle, b Budget) ([]*pidfd.Handle, []Member, error) {
	root := f.Root
	if root == "" {
		root = "/proc"
	}
	byPid := make(map[int32]*pidfd.Handle, len(members))
	for _, h := range members {
		byPid[h.Pid()] = h
	}
	// Walk down from the members through their children lists: the cost
	// follows the tree, not the host's process count.
	r := procfs.NewReader(root)
	var st procfs.Stat
	var found []*pidfd.Handle
	var unproven []Member
	spent, short := false, false
	work := make([]*pidfd.Handle, 0, len(members))
	work = append(work, members...)
	for len(work) > 0 {
		parent := work[len(work)-1]
		work = work[:len(work)-1]
		kids, err := procfs.Children(root, parent.Pid())
		if err != nil || len(kids) == 0 {
			continue
		}
		// The init of a pid namespace adopts the orphans of its namespace,
		// and anything entered into it (setns) whose parent exits: being
		// its child proves no birth.
		if ns, err := procfs.NSpid(root, parent.Pid()); err != nil || len(ns) > 1 && ns[len(ns)-1] == 1 {
			continue
		}
		for _, pid := range kids {
			if _, ok := byPid[pid]; ok {
				continue
			}
			if err := r.ReadStat(pid, &st); err != nil || st.PPid != parent.Pid() {
				continue
			}
			if spent || !take(b) {
				spent = true
				unproven = append(unproven, OverBudget(pid, tokenOf(f.Boot, &st)))
				continue
			}
			h, err := pidfd.Open(pid, f.Boot)
			if err != nil {
				give(b, 1)
				short = short || pidfd.Short(err)
				if !errors.Is(err, pidfd.ErrGone) && !errors.Is(err, os.ErrNotExist) {
					unproven = append(unproven, Member{Pid: pid, Token: tokenOf(f.Boot, &st), Reason: "child of a member but cannot be bound: " + err.Error()})
				}
				continue
			}
			// The stat read through the binding names the parent; the
			// parent still alive afterwards means that pid was our member
			// throughout.
			if h.Stat().PPid != parent.Pid() || parent.Exited() {
				h.Close()
				give(b, 1)
				continue
			}
			byPid[pid] = h
			found = append(found, h)
			work = append(work, h)
		}
	}
	return found, unproven, lackErr(spent, short)
}

func tokenOf(boot procfs.BootID, st *procfs.Stat) token.Token {
	return token.Token{Boot: boot, Start: st.StartTime, Prec: token.Ticks}
}

// GroupMembers lists the live processes whose process group is pgid, each
// reported as not provably a member: a group that outlives its leader. It
// reads every /proc/PID/stat; nil when /proc cannot be listed.
func GroupMembers(pgid int32) []Member {
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
