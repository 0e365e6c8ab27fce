package lineage

import (
	"sync"
	"time"

	"github.com/procsupervisor/supervisor/internal/boottime"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidtab"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Defaults for Config.
const (
	DefaultMaxExited    = 4096
	DefaultMaxExitedAge = 10 * time.Minute
	DefaultMaxPinned    = 16384
)

// Config tunes a Graph. The zero Config is valid.
type Config struct {
	// MaxExited bounds exited nodes no live process needs (default 4096).
	MaxExited int
	// MaxExitedAge bounds how long such a node is kept (default 10 min).
	MaxExitedAge time.Duration
	// MaxPinned bounds exited nodes kept because a live descendant needs
	// them (default 16384); past it, the oldest are elided.
	MaxPinned int
	// Boot is the boot id of every token; when zero, the first token seen
	// sets it. Events with tokens of another boot are counted and ignored.
	Boot procfs.BootID
	// Now is the graph clock (default time.Now). With the default, an
	// event that carries its kernel stamp is applied at the stamp's wall
	// time (boottime.Clock.Stamped), which costs no clock read: the time
	// it happened rather than the moment it was read.
	Now func() time.Time
}

// Stats counts what the graph holds and what it has seen.
type Stats struct {
	Live   int // live nodes
	Exited int // exited nodes retained, Pinned included
	Pinned int // exited nodes kept for a live descendant

	Forks, Execs, Exits uint64 // events applied, by kind
	// Duplicates: events that told the graph nothing new (a fork of a
	// node it already holds, a second exit).
	Duplicates uint64
	// Reissues: new generations at a pid whose previous generation the
	// graph held.
	Reissues uint64
	// ImpliedExits: exits deduced from a newer instance or a resync.
	ImpliedExits uint64
	// UnknownExits: exits of instances the graph had never seen (kept as
	// exited nodes, so a late fork finds them).
	UnknownExits uint64
	// Unattributed: exits without a token that no generation could be
	// proven to own; the pid's live node loses its continuity.
	Unattributed uint64
	// OutOfOrder: events that arrived after a later event of the same pid.
	OutOfOrder uint64
	// Gaps: Lost events and resyncs; LostEvents sums their counts.
	Gaps, LostEvents uint64
	// Evicted: exited nodes dropped by retention; Elided: pinned nodes
	// dropped past MaxPinned (their children spliced onto their parent).
	Evicted, Elided uint64
	// OtherBoot: events whose token is from another boot; Malformed:
	// events that cannot name a process (pid <= 0, unknown kind).
	OtherBoot, Malformed uint64
}

// Graph is the live lineage graph. Apply, Seed and Resync are meant for the
// one goroutine that drains the event source; queries may come from any
// goroutine.
type Graph struct {
	cfg Config
	// stamps converts events' stamps to the graph clock; nil when
	// Config.Now was given (a test's clock is the only clock).
	stamps *boottime.Clock
	// young and youngAt remember the starts of evicted nodes that started
	// within youngFor of the latest event applied (lastBoot), in eviction
	// order and by pid (the latest), until the events have moved youngFor
	// past them: a retention shorter than the reader's delay, or a burst
	// of exits over MaxExited, evicts one that young.
	young   []youngEviction
	youngAt map[int32]youngEviction
	// lastBoot is the latest CLOCK_BOOTTIME time of an event applied (0
	// when none carried one).
	lastBoot uint64

	mu      sync.RWMutex
	now     int64 // graph clock for the operation in progress
	boot    procfs.BootID
	bootSet bool
	seeded  bool
	s       slots
	pids    pidtab.Table // pid -> newest generation
	lists   [3]list      // indexed by onRetained, onPinned
	live    int
	epoch   uint32
	gapAt   int64
	roots   []string // index 0 unused
	rootIdx map[string]uint32
	// rootsKept is len(roots) after the last compactRoots: names are
	// dropped once they have doubled since.
	rootsKept int
	stats     Stats
}

// New returns an empty graph.
func New(cfg Config) *Graph {
	if cfg.MaxExited <= 0 {
		cfg.MaxExited = DefaultMaxExited
	}
	if cfg.MaxExitedAge <= 0 {
		cfg.MaxExitedAge = DefaultMaxExitedAge
	}
	if cfg.MaxPinned <= 0 {
		cfg.MaxPinned = DefaultMaxPinned
	}
	var stamps *boottime.Clock
	if cfg.Now == nil {
		cfg.Now, stamps = time.Now, new(boottime.Clock)
	}
	g := &Graph{
		cfg:     cfg,
		stamps:  stamps,
		roots:   []string{""},
		rootIdx: make(map[string]uint32),
		epoch:   1,
	}
	if cfg.Boot != (procfs.BootID{}) {
		g.boot, g.bootSet = cfg.Boot, true
	}
	return g
}

// Apply folds one event into the graph. It does not retain ev.
func (g *Graph) Apply(ev *events.Event) {
	now := g.eventNow(ev.Time)
	g.mu.Lock()
	g.now = now
	if ev.Time > g.lastBoot {
		g.lastBoot = ev.Time
	}
	if ev.Pid <= 0 && ev.Kind != events.Lost {
		g.stats.Malformed++
	} else {
		switch ev.Kind {
		case events.Fork:
			g.fork(ev)
		case events.Exec:
			g.exec(ev)
		case events.Exit:
			g.exit(ev)
		case events.Lost:
			g.gap()
			g.stats.LostEvents += ev.Count
		default:
			g.stats.Malformed++
		}
	}
	g.expire()
	g.mu.Unlock()
}

// eventNow returns the graph clock for an event stamped stamp (see
// Config.Now).
func (g *Graph) eventNow(stamp uint64) int64 {
	if g.stamps != nil {
		if t, ok := g.stamps.Stamped(stamp); ok {
			return t.UnixNano()
		}
	}
	return g.cfg.Now().UnixNano()
}

// Expire drops exited nodes past Config.MaxExitedAge. Apply does it on every
// event; a daemon calls Expire on a quiet host.
func (g *Graph) Expire() {
	now := g.cfg.Now().UnixNano()
	g.mu.Lock()
	g.now = now
	g.expire()
	g.mu.Unlock()
}

// ownBoot checks tok's boot against the graph's (a zero token passes) and
// learns the boot from the first token.
func (g *Graph) ownBoot(tok *token.Token) bool {
	if tok.IsZero() {
		return true
	}
	if !g.bootSet {
		g.boot, g.bootSet = tok.Boot, true
	}
	return tok.Boot == g.boot
}

func (g *Graph) at(i uint32) *node { return g.s.at(i) }

func (g *Graph) gap() {
	g.epoch++
	g.gapAt = g.now
	g.stats.Gaps++
}

func (g *Graph) fork(ev *events.Event) {
	tok := ev.Token
	if !g.ownBoot(&tok) {
		g.stats.OtherBoot++
		return
	}
	g.stats.Forks++
	head := g.pids.Get(ev.Pid)
	t := ev.Time
	if t == 0 {
		t = bootOf(tok)
	}
	if !tok.IsZero() {
		if i := g.match(head, tok); i != 0 {
			g.forkAgain(i, ev)
			return
		}
	} else if head != 0 && ev.Time != 0 {
		if h := g.at(head); h.prec == 0 && h.flags&fBornExact != 0 && h.bornBoot == ev.Time {
			g.stats.Duplicates++
			return
		}
	}
	i := g.newNode(ev.Pid, tok)
	n := g.at(i)
	n.ppid = ev.PPid
	n.comm = ev.Comm
	if ptok := ev.ParentToken; !ptok.IsZero() && ptok.Boot == g.boot {
		n.pstart, n.pino, n.pprec = ptok.Start, ptok.Ino, ptok.Prec
	}
	n.bornBoot = t
	if ev.Time != 0 {
		n.flags |= fBornExact
	}
	if ev.Inferred {
		n.flags |= uint32(Inferred)
	} else {
		n.flags |= uint32(BornObserved) | fCont
	}
	if head != 0 && g.at(head).age(tok, t) > 0 {
		// An instance older than the pid's newest generation: it must have
		// exited already; its exit event may still come.
		g.insertOlder(head, i)
		n.flags |= uint32(Exited | ExitImplied)
		n.exitAt = g.now
		g.live--
		g.stats.OutOfOrder++
		g.relist(i)
	} else {
		g.pushGeneration(head, i, t)
	}
	p := g.parentOf(ev.PPid, ev.ParentToken, ev.Time)
	if p != 0 && p != i {
		g.linkChild(p, i)
		g.inheritRoot(i)
	}
	switch {
	case ev.Ctx.Complete():
		g.setCtx(n, &ev.Ctx)
	case p != 0 && p != i:
		// A fork inherits its parent's session, group and cgroup.
		pn := g.at(p)
		n.sid, n.pgid, n.cgroup, n.uid = pn.sid, pn.pgid, pn.cgroup, pn.uid
		n.sstart, n.sino, n.gstart, n.gino = pn.sstart, pn.sino, pn.gstart, pn.gino
		n.flags |= pn.flags & fCtx
	}
}

// setCtx keeps the small ids of an event's context in n, a complete one
// (a part absent leaves n as it was). Leader tokens of another boot or
// precision are not kept.
func (g *Graph) setCtx(n *node, c *events.Context) {
	n.sid, n.pgid, n.cgroup, n.uid = c.SID, c.PGID, c.CgroupID, c.UID
	n.sstart, n.sino, n.gstart, n.gino = 0, 0, 0, 0
	if t := c.SessionLeader; !t.IsZero() && t.Boot == g.boot && t.Prec == n.prec {
		n.sstart, n.sino = t.Start, t.Ino
	}
	if t := c.GroupLeader; !t.IsZero() && t.Boot == g.boot && t.Prec == n.prec {
		n.gstart, n.gino = t.Start, t.Ino
	}
	n.flags |= fCtx
}

// forkAgain handles a fork of an instance the graph holds: a duplicate, or
// the birth of a node the graph knew only from a scan, an inference or an
// early exit.
func (g *Graph) forkAgain(i uint32, ev *events.Event) {
	n := g.at(i)
	if n.ino == 0 && ev.Token.Ino != 0 {
		n.ino = ev.Token.Ino
	}
	if n.flags&uint32(BornObserved) != 0 || ev.Inferred {
		g.stats.Duplicates++
		return
	}
	if n.live() {
		g.stats.Duplicates++
		if n.epoch == g.epoch {
			n.flags |= fCont
		}
	} else {
		g.stats.OutOfOrder++
	}
	n.flags = n.flags&^uint32(Inferred) | uint32(BornObserved)
	if ev.Ctx.Complete() {
		g.setCtx(n, &ev.Ctx)
	}
	if ev.Time != 0 {
		n.bornBoot = ev.Time
		n.flags |= fBornExact
	}
	n.ppid = ev.PPid
	n.pstart, n.pino, n.pprec = 0, 0, 0
	if ptok := ev.ParentToken; !ptok.IsZero() && ptok.Boot == g.boot {
		n.pstart, n.pino, n.pprec = ptok.Start, ptok.Ino, ptok.Prec
	}
	p := g.parentOf(ev.PPid, ev.ParentToken, ev.Time)
	if p == n.parent || (p != 0 && g.isAncestor(i, p)) {
		return
	}
	if n.parent != 0 {
		g.unlinkChild(i)
	}
	if p != 0 {
		g.linkChild(p, i)
		if n.flags&uint32(Root) == 0 {
			old := n.root
			g.inheritRoot(i)
			if n.root != old {
				g.setRootBelow(i, old)
			}
		}
	}
}

func (g *Graph) exec(ev *events.Event) {
	tok := ev.Token
	if !g.ownBoot(&tok) {
		g.stats.OtherBoot++
		return
	}
	g.stats.Execs++
	head := g.pids.Get(ev.Pid)
	var i uint32
	switch {
	case !tok.IsZero():
		i = g.match(head, tok)
	case head != 0:
		h := g.at(head)
		if h.live() && (ev.Time == 0 || h.bornBoot <= ev.Time) {
			i = head
		}
	}
	if i != 0 {
		n := g.at(i)
		if n.ino == 0 && tok.Ino != 0 {
			n.ino = tok.Ino
		}
		n.comm = ev.Comm
		if n.flags&uint32(Execed) != 0 {
			n.flags |= uint32(Reexeced)
		}
		n.flags |= uint32(Execed)
		if ev.Ctx.Complete() {
			g.setCtx(n, &ev.Ctx)
		}
		return
	}
	if tok.IsZero() || (head != 0 && g.at(head).age(tok, bootOf(tok)) >= 0) {
		g.stats.OutOfOrder++
		return
	}
	// A live instance whose birth the graph missed: record it, with the
	// current parent, as not BornObserved.
	i = g.newNode(ev.Pid, tok)
	n := g.at(i)
	n.ppid, n.comm = ev.PPid, ev.Comm
	n.bornBoot = bootOf(tok)
	n.flags |= uint32(Execed)
	if ev.Ctx.Complete() {
		g.setCtx(n, &ev.Ctx)
	}
	if ev.Inferred {
		n.flags |= uint32(Inferred)
	}
	g.pushGeneration(head, i, n.bornBoot)
	// It is linked to no parent: its parent of now is no proof of birth
	// (an orphan adopted by a member that is a pid namespace's init or a
	// subreaper, one entered into its namespace with nsenter), and a
	// parent named by pid alone may be a record the loss that hid this
	// birth left stale (another instance at that pid). A live parent link
	// is still looked at where it proves something (actions.ProcFinder).
}

func (g *Graph) exit(ev *events.Event) {
	tok := ev.Token
	if !g.ownBoot(&tok) {
		g.stats.OtherBoot++
		return
	}
	g.stats.Exits++
	head := g.pids.Get(ev.Pid)
	if !tok.IsZero() {
		if i := g.matchExit(head, tok); i != 0 {
			g.exitNode(i, ev)
			return
		}
		g.unknownExit(head, ev)
		return
	}
	if ev.Time == 0 {
		g.unattributed(head)
		return
	}
	i := g.genAt(head, ev.Time)
	if i == 0 {
		g.unattributed(head)
		return
	}
	n := g.at(i)
	switch {
	case n.live():
		if n.flags&fBornExact == 0 && ev.Time < n.bornBoot+tickNs {
			// The exit falls inside the tick the live node was born in: it
			// may belong to a generation the graph never saw.
			g.unattributed(head)
			return
		}
		g.exitNode(i, ev)
	case n.flags&uint32(ExitObserved) == 0:
		g.exitNode(i, ev)
	case n.exitBoot == ev.Time:
		g.stats.Duplicates++
	default:
		g.unattributed(head)
	}
}

// unattributed counts an exit no generation can be proven to own; the pid's
// live node, which it may belong to, loses its continuity.
func (g *Graph) unattributed(head uint32) {
	g.stats.Unattributed++
	if head == 0 {
		return
	}
	if n := g.at(head); n.live() {
		n.flags &^= fCont
		n.sinceAt = g.now
		n.epoch = g.epoch
	}
}

// exitNode records the exit of node i: first news, a late exit of a node
// whose exit was implied, or a duplicate.
func (g *Graph) exitNode(i uint32, ev *events.Event) {
	n := g.at(i)
	if n.ino == 0 && ev.Token.Ino != 0 {
		n.ino = ev.Token.Ino
	}
	if !n.live() {
		if n.flags&uint32(ExitObserved) != 0 || ev.Inferred {
			g.stats.Duplicates++
			return
		}
		g.stats.OutOfOrder++
		n.flags = n.flags&^uint32(ExitImplied) | uint32(ExitObserved)
		n.status = ev.Status
		if ev.Time != 0 {
			n.exitBoot = ev.Time
			n.flags &^= fExitUpper
		}
		return
	}
	g.settle(n)
	if ev.Inferred {
		n.flags |= uint32(Exited | ExitImplied)
	} else {
		n.flags |= uint32(Exited | ExitObserved)
		n.status = ev.Status
	}
	n.exitBoot = ev.Time
	n.exitAt = g.now
	g.live--
	g.propagate(i, true)
}

// unknownExit records the exit of an instance the graph never saw, so that
// its late fork finds it exited, and so that a newer instance implies the
// exit of the pid's live node.
func (g *Graph) unknownExit(head uint32, ev *events.Event) {
	g.stats.UnknownExits++
	tok := ev.Token
	i := g.newNode(ev.Pid, tok)
	n := g.at(i)
	n.comm = ev.Comm
	n.bornBoot = bootOf(tok)
	n.exitBoot = ev.Time
	n.exitAt = g.now
	n.flags |= uint32(Exited)
	if ev.Inferred {
		n.flags |= uint32(ExitImplied)
	} else {
		n.flags |= uint32(ExitObserved)
		n.status = ev.Status
	}
	g.live-- // newNode counted it live
	if head != 0 && g.at(head).age(tok, n.bornBoot) >= 0 {
		// Not provably newer than the pid's newest generation: file it
		// below, implying nothing about the live node.
		g.insertOlder(head, i)
	} else {
		g.pushGeneration(head, i, n.bornBoot)
	}
	g.relist(i)
}

// newNode allocates a live node for (pid, tok) in the current epoch; the
// caller links it into its generation chain.
func (g *Graph) newNode(pid int32, tok token.Token) uint32 {
	i := g.s.alloc()
	n := g.at(i)
	n.pid = pid
	n.start, n.ino, n.prec = tok.Start, tok.Ino, tok.Prec
	if y, ok := g.youngAt[pid]; ok && tok.Prec != 0 && (y.prec == tok.Prec && y.start == tok.Start ||
		y.prec == 0 && near(y.startBoot, bootOf(tok))) {
		n.flags |= fTwinDropped
	}
	n.seenAt, n.sinceAt = g.now, g.now
	n.epoch = g.epoch
	g.live++
	return i
}

// pushGeneration makes live node i the newest generation at its pid. A live
// previous generation exited before i was born (at boottime t, 0 unknown).
func (g *Graph) pushGeneration(head, i uint32, t uint64) {
	n := g.at(i)
	if head != 0 {
		h := g.at(head)
		if h.live() {
			g.implyExit(head, t)
		}
		g.stats.Reissues++
		h.newer = i
		n.older = head
	}
	g.pids.Set(n.pid, i)
}

// insertOlder links i into the generation chain below head, before the first
// generation it is newer than.
func (g *Graph) insertOlder(head, i uint32) {
	n := g.at(i)
	tok := g.tokenOf(n)
	cur := head
	for {
		c := g.at(cur)
		if c.older == 0 || g.at(c.older).age(tok, n.bornBoot) < 0 {
			break
		}
		cur = c.older
	}
	c := g.at(cur)
	n.newer, n.older = cur, c.older
	if c.older != 0 {
		g.at(c.older).newer = i
	}
	c.older = i
}

// implyExit marks live node i exited without an exit event; upper is a
// boottime the exit came before (0 unknown).
func (g *Graph) implyExit(i uint32, upper uint64) {
	n := g.at(i)
	g.settle(n)
	n.flags |= uint32(Exited | ExitImplied)
	n.exitBoot = upper
	if upper != 0 {
		n.flags |= fExitUpper
	}
	n.exitAt = g.now
	g.live--
	g.stats.ImpliedExits++
	g.propagate(i, true)
}

// settle freezes the continuity of a node about to exit: one that lived
// across a gap is watched only since the latest gap.
func (g *Graph) settle(n *node) {
	if n.epoch != g.epoch {
		n.sinceAt = g.gapAt
		n.flags &^= fCont
		n.epoch = g.epoch
	}
}

// match finds the generation at the pid chain starting at head that tok
// names (event semantics, see sameInstance). Chains are newest first, so the
// walk stops at the first generation older than tok.
func (g *Graph) match(head uint32, tok token.Token) uint32 {
	for i := head; i != 0; {
		n := g.at(i)
		if n.sameInstance(tok) {
			return i
		}
		if n.age(tok, 0) < 0 {
			return 0
		}
		i = n.older
	}
	return 0
}

// matchExit is match for an exit event: among generations tok cannot tell
// apart (a ticks-only token, two instances in one tick), the oldest whose
// exit has not been seen.
func (g *Graph) matchExit(head uint32, tok token.Token) uint32 {
	var first, open uint32
	for i := head; i != 0; {
		n := g.at(i)
		if n.sameInstance(tok) {
			if first == 0 {
				first = i
			}
			if n.flags&uint32(ExitObserved) == 0 {
				open = i
			}
		} else if n.age(tok, 0) < 0 {
			break
		}
		i = n.older
	}
	if open != 0 {
		return open
	}
	return first
}

// genAt finds the generation whose lifetime contains boottime t.
func (g *Graph) genAt(head uint32, t uint64) uint32 {
	for i := head; i != 0; {
		n := g.at(i)
		if n.bornBoot <= t {
			if n.live() || n.exitBoot == 0 || n.exitBoot >= t {
				return i
			}
			return 0
		}
		i = n.older
	}
	return 0
}

// parentOf resolves the creator of a process born at boottime t.
func (g *Graph) parentOf(ppid int32, ptok token.Token, t uint64) uint32 {
	if ppid <= 0 {
		return 0
	}
	head := g.pids.Get(ppid)
	if head == 0 {
		return 0
	}
	if !ptok.IsZero() {
		if ptok.Boot != g.boot {
			return 0
		}
		p := g.match(head, ptok)
		if p != 0 {
			if n := g.at(p); n.ino == 0 && ptok.Ino != 0 {
				n.ino = ptok.Ino
			}
		}
		return p
	}
	if t != 0 {
		return g.genAt(head, t)
	}
	if g.at(head).live() {
		return head
	}
	return 0
}

func (g *Graph) isAncestor(a, i uint32) bool {
	for k := uint32(0); i != 0 && k <= g.s.n; k++ {
		if i == a {
			return true
		}
		i = g.at(i).parent
	}
	return false
}

// linkChild makes c a birth child of p.
func (g *Graph) linkChild(p, c uint32) {
	g.attach(p, c)
	if g.at(c).needed() {
		pn := g.at(p)
		was := pn.needed()
		pn.needKids++
		g.propagate(p, was)
	}
}

// unlinkChild detaches c from its parent.
func (g *Graph) unlinkChild(c uint32) {
	p := g.at(c).parent
	if p == 0 {
		return
	}
	g.detach(c)
	if g.at(c).needed() {
		pn := g.at(p)
		was := pn.needed()
		pn.needKids--
		g.propagate(p, was)
	}
}

// attach and detach edit the sibling lists only; callers keep needKids.
func (g *Graph) attach(p, c uint32) {
	pn, cn := g.at(p), g.at(c)
	cn.parent = p
	cn.prev = 0
	cn.next = pn.child
	if pn.child != 0 {
		g.at(pn.child).prev = c
	}
	pn.child = c
}

func (g *Graph) detach(c uint32) {
	cn := g.at(c)
	pn := g.at(cn.parent)
	if cn.prev != 0 {
		g.at(cn.prev).next = cn.next
	} else {
		pn.child = cn.next
	}
	if cn.next != 0 {
		g.at(cn.next).prev = cn.prev
	}
	cn.parent, cn.next, cn.prev = 0, 0, 0
}

// propagate puts node i on the right list after its liveness or needKids
// changed (was: whether it was needed before), and carries a change in
// "needed" up the birth chain.
func (g *Graph) propagate(i uint32, was bool) {
	for i != 0 {
		n := g.at(i)
		g.relist(i)
		now := n.needed()
		if now == was || n.parent == 0 {
			return
		}
		p := g.at(n.parent)
		pwas := p.needed()
		if now {
			p.needKids++
		} else {
			p.needKids--
		}
		i, was = n.parent, pwas
	}
}

// relist moves node i to the list its state calls for.
func (g *Graph) relist(i uint32) {
	n := g.at(i)
	want := onNone
	if !n.live() {
		want = onRetained
		if n.needKids > 0 {
			want = onPinned
		}
	}
	if n.list == want {
		return
	}
	g.unlist(i)
	if want == onNone {
		return
	}
	l := &g.lists[want]
	n.list = want
	n.listedAt = g.now
	n.lprev, n.lnext = l.tail, 0
	if l.tail != 0 {
		g.at(l.tail).lnext = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

func (g *Graph) unlist(i uint32) {
	n := g.at(i)
	if n.list != onRetained && n.list != onPinned {
		return
	}
	l := &g.lists[n.list]
	if n.lprev != 0 {
		g.at(n.lprev).lnext = n.lnext
	} else {
		l.head = n.lnext
	}
	if n.lnext != 0 {
		g.at(n.lnext).lprev = n.lprev
	} else {
		l.tail = n.lprev
	}
	l.n--
	n.list, n.lprev, n.lnext = onNone, 0, 0
}

// youngFor is how long, in the events' own time, the start of an evicted
// node is remembered by pid (Graph.young): a process the kernel gives the
// pid within the same clock tick, its fork applied after the eviction,
// takes fTwinDropped from it. The events' time, not the graph clock: a
// wall-clock Expire ran ahead of events the reader had not applied yet,
// and dropped the record before the twin's fork came.
const youngFor = 2 * tickNs

// youngMax bounds Graph.young whatever the events' times say.
const youngMax = 1 << 16

// youngEviction is the start of an evicted node (its token's, and its
// CLOCK_BOOTTIME time).
type youngEviction struct {
	pid       int32
	prec      token.Precision
	start     uint64
	startBoot uint64
}

// expire applies the retention bounds.
func (g *Graph) expire() {
	for len(g.young) > 0 && (g.lastBoot > g.young[0].startBoot+youngFor || len(g.young) > youngMax) {
		if y := g.young[0]; g.youngAt[y.pid] == y {
			delete(g.youngAt, y.pid)
		}
		g.young = g.young[1:]
	}
	if len(g.young) == 0 && cap(g.young) > 0 {
		g.young, g.youngAt = nil, nil // let a burst's memory go
	}
	r := &g.lists[onRetained]
	for r.n > g.cfg.MaxExited {
		g.evict(r.head)
	}
	age := g.cfg.MaxExitedAge.Nanoseconds()
	for r.head != 0 && g.now-g.at(r.head).listedAt >= age {
		g.evict(r.head)
	}
	p := &g.lists[onPinned]
	for p.n > g.cfg.MaxPinned {
		g.stats.Elided++
		g.evict(p.head)
	}
}

// evict drops exited node i. Its children move to its parent, flagged
// AncestryElided, so that older ancestors still reach them. A generation
// at the same pid that may have started in i's clock tick (mayBeTwins) is
// flagged fTwinDropped: with i gone it would be the only candidate for a
// token without an inode, which names either (a stranger given the pid
// within the same tick was judged OWNED for a claim on the process before
// it, once that one was dropped).
func (g *Graph) evict(i uint32) {
	n := g.at(i)
	for j := g.pids.Get(n.pid); j != 0; j = g.at(j).older {
		if m := g.at(j); j != i && mayBeTwins(m, n) {
			m.flags |= fTwinDropped
		}
	}
	if sb := startBootOf(n); sb != 0 && g.lastBoot != 0 && near(sb, g.lastBoot) {
		y := youngEviction{pid: n.pid, prec: n.prec, start: n.start, startBoot: sb}
		if g.youngAt == nil {
			g.youngAt = map[int32]youngEviction{}
		}
		g.young, g.youngAt[n.pid] = append(g.young, y), y
	}
	g.unlist(i)
	p := n.parent
	if p != 0 {
		g.detach(i)
	}
	var k uint32
	for c := n.child; c != 0; {
		cn := g.at(c)
		next := cn.next
		cn.flags |= uint32(AncestryElided)
		cn.parent, cn.next, cn.prev = 0, 0, 0
		if cn.needed() {
			k++
		}
		if p != 0 {
			g.attach(p, c)
		}
		c = next
	}
	// n (exited) was needed exactly when it had needed children; the
	// parent trades n for them and its own state does not change.
	if p != 0 && k > 0 {
		g.at(p).needKids += k - 1
	}
	if n.newer != 0 {
		g.at(n.newer).older = n.older
	} else if n.older != 0 {
		g.pids.Set(n.pid, n.older)
	} else {
		g.pids.Delete(n.pid)
	}
	if n.older != 0 {
		g.at(n.older).newer = n.newer
	}
	g.stats.Evicted++
	g.s.release(i)
}

// inheritRoot gives node i its parent's root.
func (g *Graph) inheritRoot(i uint32) {
	n := g.at(i)
	if n.parent == 0 || n.flags&uint32(Root) != 0 {
		return
	}
	p := g.at(n.parent)
	n.root = p.root
	n.flags &^= fRootObserved
	if p.root != 0 && p.flags&fRootObserved != 0 && n.flags&uint32(BornObserved) != 0 {
		n.flags |= fRootObserved
	}
}

// setRootBelow re-derives the root of the descendants of i that held root
// old (nested admitted roots keep theirs).
func (g *Graph) setRootBelow(i uint32, old uint32) {
	stack := []uint32{i}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := g.at(k).child; c != 0; c = g.at(c).next {
			cn := g.at(c)
			if cn.flags&uint32(Root) != 0 || cn.root != old {
				continue
			}
			g.inheritRoot(c)
			stack = append(stack, c)
		}
	}
}

func (g *Graph) tokenOf(n *node) token.Token {
	if n.prec == 0 {
		return token.Token{}
	}
	return token.Token{Boot: g.boot, Start: n.start, Ino: n.ino, Prec: n.prec}
}

// isToken reports whether tok is exactly n's token (tokenOf(n) == tok),
// comparing the fields that differ most often first and without building
// the token: on the event path (Comm for every event's parent) the struct
// comparison was a call to memequal.
func (g *Graph) isToken(n *node, tok *token.Token) bool {
	if n.prec == 0 {
		return *tok == token.Token{}
	}
	return tok.Start == n.start && tok.Ino == n.ino && tok.Prec == n.prec && tok.Uniq == 0 && tok.Boot == g.boot
}

func (g *Graph) parentTokenOf(n *node) token.Token {
	if n.pprec == 0 {
		return token.Token{}
	}
	return token.Token{Boot: g.boot, Start: n.pstart, Ino: n.pino, Prec: n.pprec}
}
