package lineage

import (
	"testing"
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// ctxOf is an event context with the given session, group and cgroup.
func ctxOf(sid, pgid int32, sl, gl token.Token, cgroup uint64) events.Context {
	return events.Context{Valid: true, UID: 1000, SID: sid, PGID: pgid, SessionLeader: sl, GroupLeader: gl, CgroupID: cgroup}
}

// shellGraph is a graph with init, a shell (pid 10) forked with a context
// and its child (pid 11) forked without one.
func shellGraph() (g *Graph, init1, shell, child token.Token) {
	g = newTestGraph(newClock(), Config{})
	init1 = tk(1, 1)
	g.Seed([]events.Proc{proc(1, init1, 0, token.Token{})})
	shell = tk(10, 10)
	f := fork(10, shell, 1, init1, 100)
	f.Ctx = ctxOf(10, 10, shell, shell, 77)
	g.Apply(&f)
	child = tk(11, 11)
	f2 := fork(11, child, 10, shell, 200)
	g.Apply(&f2)
	return g, init1, shell, child
}

// TestSession checks that a fork takes its event's context or, without
// one, inherits its parent's, and that an exec replaces it.
func TestSession(t *testing.T) {
	// A shell with a context of its own; its child forked without a
	// context (a netlink event): inherited.
	g, init1, shell, child := shellGraph()
	// The child execs into a new group with a context: replaced.
	x := execEv(11, child, "job")
	x.Ctx = ctxOf(10, 11, shell, child, 78)
	// A grandchild forked before the exec is seen keeps the old context.
	grand := tk(12, 12)
	f3 := fork(12, grand, 11, child, 300)
	g.Apply(&f3)
	g.Apply(&x)
	// A process whose session leader is gone.
	orphan := tk(13, 13)
	f4 := fork(13, orphan, 1, init1, 400)
	f4.Ctx = ctxOf(5, 5, token.Token{}, token.Token{}, 1)
	g.Apply(&f4)
	// No context anywhere: unknown.
	bare := tk(14, 14)
	f5 := fork(14, bare, 1, init1, 500)
	g.Apply(&f5)

	tests := []struct {
		pid  int32
		tok  token.Token
		want Session
	}{
		{10, shell, Session{Known: true, SID: 10, PGID: 10, SessionLeader: shell, GroupLeader: shell, CgroupID: 77, UID: 1000}},
		{11, child, Session{Known: true, SID: 10, PGID: 11, SessionLeader: shell, GroupLeader: child, CgroupID: 78, UID: 1000}},
		{12, grand, Session{Known: true, SID: 10, PGID: 10, SessionLeader: shell, GroupLeader: shell, CgroupID: 77, UID: 1000}},
		{13, orphan, Session{Known: true, SID: 5, PGID: 5, CgroupID: 1, UID: 1000}},
		{14, bare, Session{}},
	}
	for _, tt := range tests {
		n, _, ok := g.Find(tt.pid, tt.tok)
		if !ok {
			t.Fatalf("Find(%d) found nothing", tt.pid)
		}
		if n.Session != tt.want {
			t.Errorf("Find(%d).Session = %+v, want %+v", tt.pid, n.Session, tt.want)
		}
	}
}

// TestSessionPartial: an exec whose context lacks a part (netlink saw the
// process change its ids or session after the exec) leaves the node's
// context as it was: the graph keeps whole contexts only.
func TestSessionPartial(t *testing.T) {
	for _, part := range []events.CtxPart{events.CtxIDs, events.CtxSession} {
		g, _, shell, child := shellGraph()
		x := execEv(11, child, "su")
		x.Ctx = ctxOf(11, 11, child, child, 78)
		x.Ctx.UID = 0
		x.Ctx.Drop(part)
		g.Apply(&x)
		n, _, ok := g.Find(11, child)
		if !ok {
			t.Fatal("Find(11) found nothing")
		}
		want := Session{Known: true, SID: 10, PGID: 10, SessionLeader: shell, GroupLeader: shell, CgroupID: 77, UID: 1000}
		if n.Session != want {
			t.Errorf("%v absent: Session = %+v, want the fork's %+v", part, n.Session, want)
		}
		if _, uid, ok := g.Attribution(11, child); !ok || uid != 1000 {
			t.Errorf("%v absent: Attribution uid %d (%v), want the fork's 1000", part, uid, ok)
		}
	}
}

// TestNodeSize keeps the per-process record within the 256-byte budget:
// strings travel with events, the graph holds only small ids.
func TestNodeSize(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n > 216 {
		t.Errorf("node is %d bytes, want at most 216 (256 per process with the pid index)", n)
	}
}

// BenchmarkMemorySession reports the heap the graph holds per live process
// whose events carry a context (session, group, leader tokens, cgroup),
// for 100k processes: the budget is 256 B.
func BenchmarkMemorySession(b *testing.B) {
	const n = 100_000
	perProc := heapPerProcess(b, n, func() *Graph {
		g := newTestGraph(newClock(), Config{})
		parent := tk(1, 1)
		g.Seed([]events.Proc{proc(1, parent, 0, token.Token{})})
		for k := range n {
			tok := tk(uint64(100+k), uint64(100+k))
			f := fork(int32(2+k), tok, 1, parent, 0)
			f.Ctx = ctxOf(1, int32(2+k), parent, tok, 42)
			g.Apply(&f)
		}
		return g
	})
	b.ReportMetric(perProc, "bytes/process")
}

// TestAttribution checks that Attribution says in one lookup what RootOf
// and Find say (the root, and the uid only for a proven instance), and
// Comm what Find says of an instance its token names exactly.
func TestAttribution(t *testing.T) {
	g, init1, shell, child := shellGraph()
	bare := tk(14, 14)
	f3 := fork(14, bare, 1, init1, 300)
	g.Apply(&f3)
	if err := g.Admit(10, shell, "r"); err != nil {
		t.Fatal(err)
	}
	noIno := token.Token{Boot: testBoot, Start: 11, Prec: token.Ticks} // Unproven against child

	tests := []struct {
		name     string
		pid      int32
		tok      token.Token
		wantRoot string
		wantUID  bool
	}{
		{"root", 10, shell, "r", true},
		{"inherited context", 11, child, "r", true},
		{"unproven token", 11, noIno, "r", false},
		{"no context, no root", 14, bare, "", false},
		{"another instance", 11, tk(99, 99), "", false},
		{"unknown pid", 50, tk(50, 50), "", false},
	}
	for _, tt := range tests {
		root, uid, uidOK := g.Attribution(tt.pid, tt.tok)
		if root != tt.wantRoot || uidOK != tt.wantUID || uidOK && uid != 1000 {
			t.Errorf("%s: Attribution = %q, %d, %v; want %q, uid known %v", tt.name, root, uid, uidOK, tt.wantRoot, tt.wantUID)
		}
		r, _, ok := g.RootOf(tt.pid, tt.tok)
		n, m, found := g.Find(tt.pid, tt.tok)
		if r != root || ok != (root != "") || (found && m == token.Same && n.Session.Known) != uidOK {
			t.Errorf("%s: Attribution disagrees with RootOf (%q, %v) and Find (%v, %v)", tt.name, r, ok, m, found)
		}
		c, cok := g.Comm(tt.pid, tt.tok)
		if want := found && m == token.Same && n.Token == tt.tok; cok != want || cok && c != n.Comm {
			t.Errorf("%s: Comm = %q, %v; Find gives %q, proven exactly %v", tt.name, c, cok, n.Comm, want)
		}
	}
}
