package lineage

import (
	"errors"
	"fmt"
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
)

// Errors from queries that need one node.
var (
	// ErrNotFound: the graph holds no instance the token names.
	ErrNotFound = errors.New("no such process instance in the lineage graph")
	// ErrAmbiguous: the token matches more than one generation at the pid
	// as far as it goes (a ticks-only token, two instances in one tick).
	ErrAmbiguous = errors.New("token cannot tell process instances apart")
	// ErrExited: the instance has exited.
	ErrExited = errors.New("process instance has exited")
	// ErrConflict: the instance is already admitted under another root.
	ErrConflict = errors.New("process instance already admitted under another root")
)

// Watch is what the graph knows about one claimed instance.
type Watch struct {
	Node Node
	// Match is how the claimed token compares with Node.Token. Unproven
	// means the claim agrees with the node as far as it goes but cannot
	// rule out another instance (see token.Compare).
	Match token.Match
	// Ambiguous: the claim matches more than one retained generation.
	Ambiguous bool
	// Continuous: the graph saw the birth and has watched the instance
	// without a gap since (until its exit, if it exited).
	Continuous bool
	// Since is the start of the latest stretch the graph watched the node
	// without a gap (the seed, the latest resync or lost event it lived
	// across, or its observed birth).
	Since time.Time
	// Root is the admitted root the node belongs to through birth lineage,
	// "" for none; RootObserved says every link to it was an observed fork.
	Root         string
	RootObserved bool
	// Predecessor and Successor are the generations at the same pid just
	// before and after this one, when the graph holds them.
	Predecessor, Successor *Node
}

// Reissue describes a reissue of the claimed pid, when the graph saw the
// claimed instance exit and another take the pid: "pid reissued: exit of
// 4242@<token> observed at <time>, ...".
func (w Watch) Reissue() (string, bool) {
	if w.Successor == nil || w.Node.Live() {
		return "", false
	}
	how := "observed"
	if !w.Node.Flags.Has(ExitObserved) {
		how = "implied"
	}
	return fmt.Sprintf("pid reissued: exit of %d@%s %s at %s, new instance %s recorded at %s",
		w.Node.Pid, w.Node.Token, how, w.Node.ExitedAt.UTC().Format(time.RFC3339Nano),
		w.Successor.Token, w.Successor.Seen.UTC().Format(time.RFC3339Nano)), true
}

// Len returns the number of nodes held, live and exited.
func (g *Graph) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.live + g.lists[onRetained].n + g.lists[onPinned].n
}

// Stats returns the counters.
func (g *Graph) Stats() Stats {
	g.mu.RLock()
	defer g.mu.RUnlock()
	s := g.stats
	s.Live = g.live
	s.Pinned = g.lists[onPinned].n
	s.Exited = g.lists[onRetained].n + s.Pinned
	return s
}

// Live returns the live instance at pid.
func (g *Graph) Live(pid int32) (Node, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i := g.pids.Get(pid)
	if i == 0 || !g.at(i).live() {
		return Node{}, false
	}
	return g.export(i), true
}

// Find returns the instance at pid that tok names, live or retained after
// its exit, with how far the tokens prove it. ok is false when no retained
// generation matches; m is then Different when the pid's known generations
// are all provably other instances, OtherBoot for a token of another boot,
// Unproven when the graph knows nothing to compare with.
func (g *Graph) Find(pid int32, tok token.Token) (n Node, m token.Match, ok bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, m, _ := g.resolve(pid, tok)
	if i == 0 {
		return Node{}, m, false
	}
	return g.export(i), m, true
}

// Watch returns what the graph knows about the instance (pid, tok), as Find
// does, with its continuity and ownership.
func (g *Graph) Watch(pid int32, tok token.Token) (Watch, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, m, amb := g.resolve(pid, tok)
	if i == 0 {
		return Watch{Match: m}, false
	}
	n := g.at(i)
	w := Watch{Node: g.export(i), Match: m, Ambiguous: amb}
	if n.live() && n.epoch != g.epoch {
		w.Since = time.Unix(0, g.gapAt)
	} else {
		w.Since = time.Unix(0, n.sinceAt)
		w.Continuous = n.flags&fCont != 0 && n.flags&uint32(BornObserved) != 0
	}
	if n.root != 0 {
		w.Root = g.roots[n.root]
		w.RootObserved = n.flags&fRootObserved != 0
	}
	if n.older != 0 {
		p := g.export(n.older)
		w.Predecessor = &p
	}
	if n.newer != 0 {
		s := g.export(n.newer)
		w.Successor = &s
	}
	return w, true
}

// Descendants returns the live descendants of (pid, tok) through birth
// lineage, whatever their parent is today and whether or not the ancestors
// in between have exited. The instance must be named without ambiguity
// (token.Same, or Unproven with a single candidate: callers that need proof
// judge the claim with Watch first).
func (g *Graph) Descendants(pid int32, tok token.Token) ([]Node, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, err := g.one(pid, tok)
	if err != nil {
		return nil, err
	}
	var out []Node
	stack := []uint32{i}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := g.at(k).child; c != 0; c = g.at(c).next {
			if g.at(c).live() {
				out = append(out, g.export(c))
			}
			stack = append(stack, c)
		}
	}
	return out, nil
}

// Ancestors returns the birth ancestry of (pid, tok), nearest first, as far
// as the graph holds it; exited ancestors have the Exited flag. A node with
// AncestryElided marks where an ancestor was dropped.
func (g *Graph) Ancestors(pid int32, tok token.Token) ([]Node, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, err := g.one(pid, tok)
	if err != nil {
		return nil, err
	}
	var out []Node
	for k := uint32(0); k <= g.s.n; k++ {
		i = g.at(i).parent
		if i == 0 {
			break
		}
		out = append(out, g.export(i))
	}
	return out, nil
}

// Admit makes the live instance (pid, tok) an admitted root named root.
// Its descendants the graph holds, and every child born from them later,
// belong to root through birth lineage (nested admitted roots keep their
// own). Admitting a root again under the same name is a no-op.
func (g *Graph) Admit(pid int32, tok token.Token, root string) error {
	if root == "" {
		return fmt.Errorf("admit %d@%s: empty root name", pid, tok)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i, err := g.one(pid, tok)
	if err != nil {
		return fmt.Errorf("admit %d@%s: %w", pid, tok, err)
	}
	n := g.at(i)
	if !n.live() {
		return fmt.Errorf("admit %d@%s: %w", pid, tok, ErrExited)
	}
	if n.flags&uint32(Root) != 0 {
		if g.roots[n.root] == root {
			return nil
		}
		return fmt.Errorf("admit %d@%s as %q: root %q: %w", pid, tok, root, g.roots[n.root], ErrConflict)
	}
	r, ok := g.rootIdx[root]
	if !ok && len(g.roots) >= max(2*g.rootsKept, minRootsCompacted) {
		g.compactRoots()
	}
	if !ok {
		r = uint32(len(g.roots))
		g.roots = append(g.roots, root)
		g.rootIdx[root] = r
	}
	old := n.root
	n.root = r
	n.flags |= uint32(Root) | fRootObserved
	g.setRootBelow(i, old)
	return nil
}

// minRootsCompacted is the fewest root names compactRoots is run for.
const minRootsCompacted = 1024

// compactRoots drops the names of the roots no node refers to any more
// (every process of theirs expired from the graph) and renumbers the rest
// in the nodes. Before, every root ever admitted kept its name for the
// graph's life: a user launching and releasing claims within its quotas
// grew the daemon without end. Admit runs it when the names have doubled
// since the last run, so its walk of every node is paid once per as many
// admissions as there were names. g.mu is held.
func (g *Graph) compactRoots() {
	to := make([]uint32, len(g.roots)) // old index -> new; 0: dropped
	for i := uint32(1); i < g.s.n; i++ {
		if r := g.at(i).root; r != 0 {
			to[r] = 1
		}
	}
	roots := []string{""}
	clear(g.rootIdx)
	for old, name := range g.roots {
		if old == 0 || to[old] == 0 {
			continue
		}
		to[old] = uint32(len(roots))
		g.rootIdx[name] = to[old]
		roots = append(roots, name)
	}
	for i := uint32(1); i < g.s.n; i++ {
		if n := g.at(i); n.root != 0 {
			n.root = to[n.root]
		}
	}
	g.roots, g.rootsKept = roots, len(roots)
}

// RootOf returns the admitted root (pid, tok) belongs to through birth
// lineage; observed says every link from the root down was an observed
// fork (not a scan or an inference). ok is false when the instance is not
// found without ambiguity or belongs to no root.
func (g *Graph) RootOf(pid int32, tok token.Token) (root string, observed, ok bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, err := g.one(pid, tok)
	if err != nil {
		return "", false, false
	}
	n := g.at(i)
	if n.root == 0 {
		return "", false, false
	}
	return g.roots[n.root], n.flags&fRootObserved != 0, true
}

// Attribution returns, in one lookup, what RootOf and Find say of whom
// (pid, tok) is: the root it belongs to ("" when RootOf's ok would be
// false), and the real uid of its last context when tok names it with
// proof (token.Same) and the graph kept one.
func (g *Graph) Attribution(pid int32, tok token.Token) (root string, uid uint32, uidOK bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, m, amb := g.resolve(pid, tok)
	if i == 0 {
		return "", 0, false
	}
	n := g.at(i)
	if m == token.Same && n.flags&fCtx != 0 {
		uid, uidOK = n.uid, true
	}
	if !amb && n.root != 0 {
		root = g.roots[n.root]
	}
	return root, uid, uidOK
}

// Comm returns the comm of the instance at pid that tok names with proof
// (token.Same) and exactly (the very token the graph holds), as Find would
// give it, without building the whole Node.
func (g *Graph) Comm(pid int32, tok token.Token) ([16]byte, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, m, _ := g.resolve(pid, tok)
	if i == 0 || m != token.Same {
		return [16]byte{}, false
	}
	n := g.at(i)
	if !g.isToken(n, &tok) {
		return [16]byte{}, false
	}
	return n.comm, true
}

// Childless reports whether the graph holds the instance at pid that tok
// names exactly, exited, with no birth child: no process it knows, live or
// retained, was born of it. A kernel mechanism reports a fork before its
// creator's exit, so once such an instance has exited no later event names
// it as parent (only a resync, after a loss, could link one).
func (g *Graph) Childless(pid int32, tok token.Token) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	i, m, _ := g.resolve(pid, tok)
	if i == 0 || m != token.Same {
		return false
	}
	n := g.at(i)
	return g.isToken(n, &tok) && !n.live() && n.child == 0
}

// untokenedTwin reports whether a generation at pid other than cand has no
// token and may have started in cand's clock tick (mayBeTwins): a netlink
// fork whose child exited before its token could be read.
func (g *Graph) untokenedTwin(pid int32, cand uint32) bool {
	c := g.at(cand)
	for i := g.pids.Get(pid); i != 0; i = g.at(i).older {
		if n := g.at(i); i != cand && n.prec == 0 && mayBeTwins(n, c) {
			return true
		}
	}
	return false
}

// resolve finds the generation at pid that tok names by token.Compare: Same
// wins; otherwise the newest Unproven candidate (same precision and start),
// with ambiguous set when there are several, or were (fTwinDropped).
func (g *Graph) resolve(pid int32, tok token.Token) (idx uint32, m token.Match, ambiguous bool) {
	var cand uint32
	var count int
	sawDiff, sawOther := false, false
	for i := g.pids.Get(pid); i != 0; i = g.at(i).older {
		n := g.at(i)
		mm, _ := token.Compare(tok, g.tokenOf(n))
		switch mm {
		case token.Same:
			return i, token.Same, false
		case token.Different:
			sawDiff = true
		case token.OtherBoot:
			sawOther = true
		case token.Unproven:
			if n.prec != 0 && n.prec == tok.Prec && n.start == tok.Start {
				if cand == 0 {
					cand = i
				}
				count++
			}
		}
	}
	switch {
	case cand != 0:
		// A twin the graph dropped is a candidate it no longer holds,
		// and one it holds without a token may be the instance named.
		return cand, token.Unproven, count > 1 || g.at(cand).flags&fTwinDropped != 0 || g.untokenedTwin(pid, cand)
	case sawOther:
		return 0, token.OtherBoot, false
	case sawDiff:
		return 0, token.Different, false
	}
	return 0, token.Unproven, false
}

// one resolves (pid, tok) to a single node or says why it cannot.
func (g *Graph) one(pid int32, tok token.Token) (uint32, error) {
	i, _, amb := g.resolve(pid, tok)
	switch {
	case i == 0:
		return 0, ErrNotFound
	case amb:
		return 0, ErrAmbiguous
	}
	return i, nil
}

func (g *Graph) export(i uint32) Node {
	n := g.at(i)
	out := Node{
		Pid:         n.pid,
		PPid:        n.ppid,
		Token:       g.tokenOf(n),
		ParentToken: g.parentTokenOf(n),
		Comm:        n.comm,
		Seen:        time.Unix(0, n.seenAt),
		BootStart:   time.Duration(n.bornBoot),
		ExitStatus:  n.status,
		Flags:       Flags(n.flags & exportMask),
	}
	if n.flags&fCtx != 0 {
		out.Session = Session{Known: true, SID: n.sid, PGID: n.pgid, CgroupID: n.cgroup, UID: n.uid,
			SessionLeader: g.leaderToken(n, n.sstart, n.sino),
			GroupLeader:   g.leaderToken(n, n.gstart, n.gino)}
	}
	if !n.live() {
		out.ExitedAt = time.Unix(0, n.exitAt)
		if n.flags&fExitUpper == 0 {
			out.BootExit = time.Duration(n.exitBoot)
		}
	}
	return out
}

// leaderToken rebuilds a leader's token kept in n (zero when start is 0:
// the leader was gone).
func (g *Graph) leaderToken(n *node, start, ino uint64) token.Token {
	if start == 0 && ino == 0 {
		return token.Token{}
	}
	return token.Token{Boot: g.boot, Start: start, Ino: ino, Prec: n.prec}
}

// Blind says why the members the graph finds below a tree's first
// instances may not be the whole tree: an instance the graph did not watch
// without a gap since its birth (or a birth ancestor of one, up to its
// admitted root), so that a child it forked unseen and then left (its
// parent exited, the kernel reparented it) is linked to nothing.
type Blind struct {
	Pid   int32
	Token token.Token
	Cause BlindCause
	// Since is when the latest stretch the graph watched the instance
	// without a gap began (zero for NotHeld).
	Since time.Time
}

// BlindCause is why an instance's lineage has a hole.
type BlindCause uint8

// Causes of a hole in an instance's lineage.
const (
	// NotHeld: the graph holds no record of the instance.
	NotHeld BlindCause = iota + 1
	// UnseenBirth: the instance was born before the graph watched it (a
	// seed or resync found it).
	UnseenBirth
	// InferredBirth: a poller inferred the instance from two snapshots;
	// what it forked and left between them was never seen.
	InferredBirth
	// LostEvents: events were lost while the instance lived.
	LostEvents
)

// Blind returns the first of insts, taken in order, whose lineage has a
// hole, looking at each instance and its birth ancestors up to the admitted
// root it belongs to (an instance under no admitted root is looked at
// alone). ok is false when the graph watched all of them without a gap
// from birth.
func (g *Graph) Blind(insts []token.Instance) (b Blind, ok bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	seen := make(map[uint32]bool, len(insts))
	for _, in := range insts {
		i, err := g.one(in.Pid, in.Token)
		if err != nil {
			return Blind{Pid: in.Pid, Token: in.Token, Cause: NotHeld}, true
		}
		for k := uint32(0); i != 0 && !seen[i] && k <= g.s.n; k++ {
			seen[i] = true
			n := g.at(i)
			if b, ok := g.blind(n); ok {
				return b, true
			}
			if n.root == 0 || n.flags&uint32(Root) != 0 {
				break
			}
			p := n.parent
			if p == 0 || g.at(p).root != n.root {
				break
			}
			i = p
		}
	}
	return Blind{}, false
}

// blind judges one node as Watch does its continuity.
func (g *Graph) blind(n *node) (Blind, bool) {
	b := Blind{Pid: n.pid, Token: g.tokenOf(n), Since: time.Unix(0, n.sinceAt)}
	switch {
	case n.flags&uint32(Inferred) != 0:
		b.Cause = InferredBirth
	case n.flags&uint32(BornObserved) == 0:
		b.Cause = UnseenBirth
	case n.live() && n.epoch != g.epoch:
		b.Cause, b.Since = LostEvents, time.Unix(0, g.gapAt)
	case n.flags&fCont == 0:
		b.Cause = LostEvents
	default:
		return Blind{}, false
	}
	return b, true
}
