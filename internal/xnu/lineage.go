package xnu

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Member is a recorded instance of a tree, with the latest reply that
// named it.
type Member struct {
	Ident
	// Gone is set when a look found no live process with this uniqueid.
	Gone bool
	// forks counts NOTE_FORK events seen for the member; children counts
	// the recorded members it is the birth parent of.
	forks, children int
}

// Lineage records the instances of one tree by uniqueid: the root and
// every process whose p_puniqueid is a recorded uniqueid, transitively.
// Uniqueids grow with every fork, so a child's is always greater than its
// parent's, and one pass over a look sorted by uniqueid closes the set.
// A Lineage is not safe for concurrent use.
type Lineage struct {
	k        Kernel
	root     uint64
	members  map[uint64]*Member
	attached map[int32]uint64 // pid -> uniqueid of the watched instance
	// last is the last look, every readable process by uniqueid.
	last map[uint64]Ident
	// unreadable holds the pids of the last look whose identity could not
	// be read (other than gone): they are not members, a tree through them
	// cannot be proven, and a member at such a pid is not taken for gone.
	unreadable map[int32]bool
}

// NewLineage starts a lineage at root, an instance judged a moment ago.
func NewLineage(k Kernel, root Ident) *Lineage {
	l := &Lineage{k: k, root: root.UniqueID, members: map[uint64]*Member{}, attached: map[int32]uint64{}}
	l.members[root.UniqueID] = &Member{Ident: root}
	return l
}

// NewGoneLineage starts a lineage at a root that has exited, known only by
// its uniqueid (from its token): its descendants are still found through
// their p_puniqueid.
func NewGoneLineage(k Kernel, rootUniq uint64) *Lineage {
	l := &Lineage{k: k, root: rootUniq, members: map[uint64]*Member{}, attached: map[int32]uint64{}}
	l.members[rootUniq] = &Member{Ident: Ident{UniqueID: rootUniq}, Gone: true}
	return l
}

// Recorded reports whether uniq is a recorded member.
func (l *Lineage) Recorded(uniq uint64) bool { return l.members[uniq] != nil }

// Member returns the recorded member with uniqueid uniq, or nil.
func (l *Lineage) Member(uniq uint64) *Member { return l.members[uniq] }

// Members returns every recorded member, gone ones too, parents before
// children (ascending uniqueid).
func (l *Lineage) Members() []*Member {
	out := make([]*Member, 0, len(l.members))
	for _, m := range l.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Member) int { return cmpUint(a.UniqueID, b.UniqueID) })
	return out
}

// Live returns the members not known to be gone, parents first.
func (l *Lineage) Live() []*Member {
	return slices.DeleteFunc(l.Members(), func(m *Member) bool { return m.Gone })
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Scan takes one look at the process table and records every process
// descending from a recorded member. It returns the members found by this
// look. A failed listing is an error, never an empty world: nothing is
// marked gone from it.
func (l *Lineage) Scan() ([]*Member, error) {
	pids, err := l.k.Pids()
	if err != nil {
		return nil, fmt.Errorf("listing pids: %w", err)
	}
	look := make([]Ident, 0, len(pids))
	l.unreadable = map[int32]bool{}
	for _, pid := range pids {
		id, err := l.k.IDs(pid)
		switch {
		case errors.Is(err, ErrNoProcess):
			continue
		case err != nil:
			l.unreadable[pid] = true
			continue
		}
		look = append(look, id)
	}
	slices.SortFunc(look, func(a, b Ident) int { return cmpUint(a.UniqueID, b.UniqueID) })
	l.last = make(map[uint64]Ident, len(look))
	var found []*Member
	for _, id := range look {
		l.last[id.UniqueID] = id
		if m := l.members[id.UniqueID]; m != nil {
			if id.StartMicro == 0 { // same instance, same start: keep what an earlier reply said
				id.StartMicro = m.StartMicro
			}
			m.Ident, m.Gone = id, false
			continue
		}
		parent := l.members[id.PUniqueID]
		if parent == nil || id.PUniqueID == 0 {
			continue
		}
		// A new member: one full reply for its start time (its token), kept
		// only if it still names this instance; it is the later reply.
		if full, err := l.k.Identity(id.Pid); err == nil && full.UniqueID == id.UniqueID {
			id = full
		}
		m := &Member{Ident: id}
		l.members[id.UniqueID] = m
		parent.children++
		found = append(found, m)
	}
	for u, m := range l.members {
		if _, ok := l.last[u]; !ok && !(m.Pid != 0 && l.unreadable[m.Pid]) {
			m.Gone = true
		}
	}
	return found, nil
}

// Unreadable returns the pids of the last look whose identity could not be
// read: nothing proves what they are.
func (l *Lineage) Unreadable() []int32 {
	out := make([]int32, 0, len(l.unreadable))
	for pid := range l.unreadable {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Unproven lists the processes of the last look that may descend from a
// member through an intermediate never recorded: a member forked (a
// NOTE_FORK) more children than were recorded, and a process born after
// that member has a birth parent that is neither recorded nor alive. They
// are reported, never signalled: nothing proves the chain.
func (l *Lineage) Unproven(boot procfs.BootID) []token.Instance {
	var lost []*Member
	for _, m := range l.members {
		if m.forks > m.children {
			lost = append(lost, m)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	var out []token.Instance
	for _, id := range l.last {
		if l.members[id.UniqueID] != nil || l.members[id.PUniqueID] != nil {
			continue
		}
		if _, alive := l.last[id.PUniqueID]; alive {
			continue
		}
		for _, m := range lost {
			if id.PUniqueID > m.UniqueID {
				if full, err := l.k.Identity(id.Pid); err == nil && full.UniqueID == id.UniqueID {
					id = full
				}
				out = append(out, token.Instance{Pid: id.Pid, Token: id.Token(boot), Reason: fmt.Sprintf(
					"birth parent (uniqueid %d) was never recorded; it may have been a child of member %d (uniqueid %d) that exited before it was seen: not signalled",
					id.PUniqueID, m.Pid, m.UniqueID)})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b token.Instance) int { return int(a.Pid - b.Pid) })
	return out
}

// Watch attaches w to every live member not yet watched, and confirms
// after each attach that the pid still holds that member (a knote follows
// the instance found at attach time, which may already be another).
func (l *Lineage) Watch(w Watcher) {
	for _, m := range l.Live() {
		if u, ok := l.attached[m.Pid]; ok && u == m.UniqueID {
			continue
		}
		if err := w.Attach(m.Pid); err != nil {
			continue
		}
		id, err := l.k.Identity(m.Pid)
		if err != nil || id.UniqueID != m.UniqueID {
			_ = w.Detach(m.Pid)
			delete(l.attached, m.Pid)
			continue
		}
		l.attached[m.Pid] = m.UniqueID
	}
}

// Pump waits up to d for EVFILT_PROC notes of watched members; a fork or
// an exec of one triggers a rescan (recording the new children while their
// parents live) and the new members are watched too. It returns whether a
// rescan ran, and the members found.
func (l *Lineage) Pump(w Watcher, d time.Duration) (bool, []*Member, error) {
	notes, err := w.Wait(d)
	if err != nil {
		return false, nil, fmt.Errorf("kqueue: %w", err)
	}
	rescan := false
	for _, n := range notes {
		u, ok := l.attached[n.Pid]
		if !ok {
			continue
		}
		m := l.members[u]
		if n.Fork && m != nil {
			m.forks++
		}
		if n.Fork || n.Exec {
			rescan = true
		}
		if n.Exit {
			delete(l.attached, n.Pid)
			if m != nil {
				m.Gone = true
			}
		}
	}
	if !rescan {
		return false, nil, nil
	}
	found, err := l.Scan()
	if err != nil {
		return true, nil, err
	}
	l.Watch(w)
	return true, found, nil
}

// Follow records the tree while its root lives: it watches the members,
// rescans on every fork or exec, and returns when the root exits, stop
// reports true (checked between waits of step), or the kqueue fails.
func (l *Lineage) Follow(w Watcher, step time.Duration, stop func() bool) error {
	if _, err := l.Scan(); err != nil {
		return err
	}
	l.Watch(w)
	for !stop() {
		if m := l.members[l.root]; m == nil || m.Gone {
			return nil
		}
		if _, _, err := l.Pump(w, step); err != nil {
			return err
		}
	}
	return nil
}
