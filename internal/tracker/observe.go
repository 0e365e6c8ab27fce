package tracker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Observe implements verdict.Observer from what the graph watched.
func (t *Tracker) Observe(pid int32, claim token.Token) verdict.Observation {
	o := verdict.Observation{Mechanism: string(t.Mechanism())}
	w, ok := t.graph.Watch(pid, claim)
	if !ok || w.Ambiguous {
		return o
	}
	o.Known = true
	o.Continuous = w.Continuous
	if !w.Node.Live() {
		o.Exited = true
		o.ExitedAt = w.Node.ExitedAt
		o.ExitInferred = !w.Node.Flags.Has(lineage.ExitObserved)
	}
	if w.Successor != nil {
		o.Reissued = w.Successor.Token
	}
	return o
}

// Finder returns an actions.Finder that collects members through observed
// lineage: the live birth descendants the graph holds, including those the
// kernel reparented to init. Each candidate must be proven before it is
// bound: by judge (its token, or the graph's continuous watch), or, for a
// process the graph only knows from a scan, by a parent link read while the
// parent was a live member.
func (t *Tracker) Finder(judge actions.Binder) actions.Finder {
	return &graphFinder{t: t, judge: judge, proc: &actions.ProcFinder{Root: t.root, Boot: t.boot}}
}

type graphFinder struct {
	t     *Tracker
	judge actions.Binder
	proc  *actions.ProcFinder
	// gaps and lost are the graph's gap count and the source's loss count
	// at the teardown's first Blind (its start; a finder is one
	// teardown's), once read.
	gaps, lost uint64
	lostOK     bool
	read       bool
}

func (f *graphFinder) Name() string { return "observed lineage (" + string(f.t.Mechanism()) + ")" }

// syncWait bounds how long Find waits for the graph to catch up with the
// kernel's events (Sync) before it looks.
const syncWait = 2 * time.Second

func (f *graphFinder) Find(members []*pidfd.Handle, b actions.Budget) ([]*pidfd.Handle, []actions.Member, error) {
	// Children forked before this call must be in the graph: one whose
	// parent exited since is found by nothing else.
	ctx, cancel := context.WithTimeout(context.Background(), syncWait)
	errSync := f.t.Sync(ctx)
	cancel()
	have := make(map[int32]bool, len(members))
	for _, h := range members {
		have[h.Pid()] = true
	}
	var found []*pidfd.Handle
	var unproven []actions.Member
	seen := map[int32]bool{}
	spent, short := false, false
	for _, h := range members {
		nodes, err := f.t.graph.Descendants(h.Pid(), h.Token())
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if have[n.Pid] || seen[n.Pid] {
				continue
			}
			seen[n.Pid] = true
			if spent || b != nil && !b.Take() {
				spent = true
				unproven = append(unproven, actions.OverBudget(n.Pid, n.Token))
				continue
			}
			v, nh := f.judge.Bind(n.Pid, n.Token)
			if nh != nil {
				found = append(found, nh)
				have[n.Pid] = true
				continue
			}
			if b != nil {
				b.Give(1)
			}
			short = short || v.Transient
			if v.Result == verdict.Unverifiable {
				unproven = append(unproven, actions.Member{Pid: n.Pid, Token: n.Token, Reason: "a birth descendant whose identity cannot be proven: " + v.Reason})
			}
		}
	}
	// What the graph cannot prove (a process it knows only from the seed
	// scan) may still be proven by a live parent link. That link is
	// evidence of birth only for such a process: one whose birth the graph
	// observed is a member only if its birth parent is, and today's parent
	// of an adopted process (by a namespace init, a subreaper) says
	// nothing about where it came from.
	all := append(append([]*pidfd.Handle{}, members...), found...)
	// With the budget spent, the parent links still name what is left
	// (reported over the budget, unbound), unless descriptors came back.
	more, over, err := f.proc.Find(all, b)
	for _, h := range more {
		if h.Exited() {
			// A zombie (a member's child it has not reaped) is gone:
			// nothing to signal, nothing to report as unproven.
			h.Close()
			if b != nil {
				b.Give(1)
			}
			continue
		}
		// One born of a member is one (a child forked between the
		// graph's look above and this walk: the graph has it now).
		if n, m, ok := f.t.graph.Find(h.Pid(), h.Token()); ok && m == token.Same && n.Flags.Has(lineage.BornObserved) && !bornOf(all, &n) {
			unproven = append(unproven, actions.Member{Pid: h.Pid(), Token: h.Token(),
				Reason: fmt.Sprintf("adopted by a member, born of %d which is not one", n.PPid)})
			h.Close()
			if b != nil {
				b.Give(1)
			}
			continue
		}
		found = append(found, h)
		unproven = dropMember(unproven, h.Pid())
	}
	if errors.Is(err, actions.ErrBudget) {
		// Not bound, so not proven members either way: the lineage's
		// word on them is lost with the binding, and what the parent
		// links would have said is reported as over the budget.
		for _, m := range over {
			unproven = append(dropMember(unproven, m.Pid), m)
		}
	} else if spent {
		err = joinErr(err, actions.ErrBudget)
	}
	if short && !errors.Is(err, actions.ErrShort) {
		// A member the judge could not look at for a want of
		// descriptors or memory: a later look may bind it.
		err = joinErr(err, actions.ErrShort)
	}
	return found, unproven, joinErr(errSync, err)
}

// Blind implements the actions package's blindFinder: why the members
// Find returns from members may not be the whole tree, "" when the graph
// watched each of them, and their birth ancestors up to their admitted
// root, without a gap from birth.
func (f *graphFinder) Blind(members []*pidfd.Handle) string {
	if !f.read {
		f.read = true
		f.gaps = f.t.graph.Stats().Gaps
		f.lost, f.lostOK = f.t.Losses()
	}
	return f.blind(members, false)
}

// BlindAtEnd implements the actions package's blindFinder: Blind at the
// end of a teardown, once the graph has caught up (Sync, as Find does).
// There, the graph's word on an exited member still counts while it holds
// the member (a loss it lived across is kept with its exit), and a member
// that has exited and is no longer held (lineage.NotHeld) is no hole: its
// record was kept at least as long as the teardown looked for what it
// forked, and its exit ends its forks. A live member not held still is.
//
// A loss during the teardown is a hole whatever the graph still holds:
// the records that would show it (a member live across it) may have been
// dropped since (retention, or the cap on records kept for live
// descendants, which one user's chain of processes fills), and a review's
// member forked during the loss, exited, and its child lived on unsaid.
func (f *graphFinder) BlindAtEnd(members []*pidfd.Handle) string {
	ctx, cancel := context.WithTimeout(context.Background(), syncWait)
	f.t.Sync(ctx) // without it, the graph's answer as it stands
	cancel()
	if why := f.blind(members, true); why != "" {
		return why
	}
	if f.read {
		if g := f.t.graph.Stats().Gaps; g != f.gaps {
			return fmt.Sprintf("events were lost during the teardown (%d gaps in the lineage): a process a member forked then and left is not found", g-f.gaps)
		}
		if n, ok := f.t.Losses(); ok && f.lostOK && n != f.lost {
			return fmt.Sprintf("events were lost during the teardown (%d): a process a member forked then and left is not found", n-f.lost)
		}
	}
	return ""
}

// blind words the first hole lineage.Graph.Blind finds in members'
// lineage; with exitedGone, it passes over a member that has exited and
// is not held, and looks on from the next.
func (f *graphFinder) blind(members []*pidfd.Handle, exitedGone bool) string {
	insts := make([]token.Instance, len(members))
	for i, h := range members {
		insts[i] = token.Instance{Pid: h.Pid(), Token: h.Token()}
	}
	var b lineage.Blind
	for {
		var ok bool
		if b, ok = f.t.graph.Blind(insts); !ok {
			return ""
		}
		if !exitedGone || b.Cause != lineage.NotHeld {
			break
		}
		// Graph.Blind takes insts in order: those before this one have
		// no hole.
		i := slices.IndexFunc(members, func(h *pidfd.Handle) bool {
			return h.Pid() == b.Pid && h.Token() == b.Token
		})
		if i < 0 || !members[i].Exited() {
			break
		}
		insts, members = insts[i+1:], members[i+1:]
	}
	at := b.Since.UTC().Format(time.RFC3339Nano)
	switch b.Cause {
	case lineage.NotHeld:
		return fmt.Sprintf("the lineage holds no record of pid %d: what it forked is not known", b.Pid)
	case lineage.UnseenBirth:
		return fmt.Sprintf("pid %d was born before the lineage watched it (from %s): a process it forked and left before then is not found", b.Pid, at)
	case lineage.InferredBirth:
		return fmt.Sprintf("pid %d is known from polling, not from its fork: a process it forked and left between two polls is not found", b.Pid)
	}
	return fmt.Sprintf("events were lost while pid %d lived (watched whole again from %s): a process it forked then and left is not found", b.Pid, at)
}

// joinErr is errors.Join for two, but a lone error stays itself (a
// spent budget alone is actions.ErrBudget, which the teardown tells
// apart from a failure).
func joinErr(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return errors.Join(a, b)
}

// bornOf reports whether n's birth parent, as the graph saw its fork, is
// one of hs.
func bornOf(hs []*pidfd.Handle, n *lineage.Node) bool {
	return !n.ParentToken.IsZero() && slices.ContainsFunc(hs, func(h *pidfd.Handle) bool {
		m, _ := token.Compare(n.ParentToken, h.Token())
		return h.Pid() == n.PPid && m == token.Same
	})
}

func dropMember(ms []actions.Member, pid int32) []actions.Member {
	out := ms[:0]
	for _, m := range ms {
		if m.Pid != pid {
			out = append(out, m)
		}
	}
	return out
}
