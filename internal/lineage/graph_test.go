package lineage

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidtab"
	"github.com/procsupervisor/supervisor/internal/token"
)

// wantNode is what a scenario expects of one instance.
type wantNode struct {
	pid    int32
	tok    token.Token
	has    Flags // flags that must be set
	hasNot Flags // flags that must not be set
	ppid   int32
	status uint32
}

const (
	sec = uint64(time.Second)
	ms  = uint64(time.Millisecond)
)

func TestSequences(t *testing.T) {
	initTok := tk(1, 1)
	shell := tk(100, 50)
	tests := []struct {
		name  string
		seed  []events.Proc
		evs   []events.Event
		nodes []wantNode
		live  []int32 // pids with a live node, exactly
		stats Stats   // non-zero counters are compared
	}{{
		// The pid index pages by 1024 and keeps pids from 2^22 on in a map:
		// the graph answers the same on either side of each edge.
		name: "pids at the edges of the pid index",
		seed: []events.Proc{proc(1, initTok, 0, token.Token{})},
		evs: []events.Event{
			fork(1023, tk(300, 60), 1, initTok, 3*sec),
			fork(1024, tk(301, 61), 1023, tk(300, 60), 3*sec),
			fork(pidtab.Max-1, tk(302, 62), 1024, tk(301, 61), 3*sec),
			fork(pidtab.Max, tk(303, 63), pidtab.Max-1, tk(302, 62), 3*sec),
			fork(math.MaxInt32, tk(304, 64), pidtab.Max, tk(303, 63), 3*sec),
			exit(pidtab.Max, tk(303, 63), 0, 4*sec),
			fork(pidtab.Max, tk(305, 65), 1, initTok, 5*sec),
			exit(1024, tk(301, 61), 0, 5*sec),
		},
		nodes: []wantNode{
			{pid: 1024, tok: tk(301, 61), ppid: 1023, has: BornObserved | Exited | ExitObserved},
			{pid: pidtab.Max - 1, tok: tk(302, 62), ppid: 1024, has: BornObserved, hasNot: Exited},
			{pid: pidtab.Max, tok: tk(303, 63), ppid: pidtab.Max - 1, has: BornObserved | Exited | ExitObserved},
			{pid: pidtab.Max, tok: tk(305, 65), ppid: 1, has: BornObserved, hasNot: Exited},
			{pid: math.MaxInt32, tok: tk(304, 64), ppid: pidtab.Max, has: BornObserved, hasNot: Exited},
		},
		live:  []int32{1, 1023, pidtab.Max - 1, pidtab.Max, math.MaxInt32},
		stats: Stats{Forks: 6, Exits: 2, Exited: 2, Pinned: 2, Reissues: 1},
	}, {
		name: "fork exec exit",
		seed: []events.Proc{proc(1, initTok, 0, token.Token{})},
		evs: []events.Event{
			fork(200, tk(300, 60), 1, initTok, 3*sec),
			execEv(200, tk(300, 60), "sleep"),
			exit(200, tk(300, 60), 9, 4*sec),
		},
		nodes: []wantNode{
			{pid: 1, tok: initTok, hasNot: BornObserved | Exited},
			{pid: 200, tok: tk(300, 60), ppid: 1, status: 9, has: BornObserved | Execed | Exited | ExitObserved, hasNot: ExitImplied},
		},
		live:  []int32{1},
		stats: Stats{Forks: 1, Execs: 1, Exits: 1, Exited: 1},
	}, {
		name: "double fork keeps the birth parent",
		seed: []events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, shell, 1, initTok)},
		evs: []events.Event{
			fork(11, tk(200, 61), 10, shell, 2*sec),
			fork(12, tk(201, 62), 11, tk(200, 61), 2*sec+5*ms),
			exit(11, tk(200, 61), 0, 2*sec+6*ms),
			// the kernel reparents 12 to init; no event says so.
			execEv(12, tk(201, 62), "daemon"),
		},
		nodes: []wantNode{
			{pid: 11, tok: tk(200, 61), ppid: 10, has: Exited | ExitObserved},
			{pid: 12, tok: tk(201, 62), ppid: 11, has: BornObserved | Execed, hasNot: Exited},
		},
		live:  []int32{1, 10, 12},
		stats: Stats{Pinned: 1},
	}, {
		name: "fork without exit implies the old generation exited",
		evs: []events.Event{
			fork(300, tk(10, 70), 1, token.Token{}, 1*sec),
			fork(300, tk(20, 80), 1, token.Token{}, 2*sec),
		},
		nodes: []wantNode{
			{pid: 300, tok: tk(10, 70), has: Exited | ExitImplied, hasNot: ExitObserved},
			{pid: 300, tok: tk(20, 80), has: BornObserved, hasNot: Exited},
		},
		live:  []int32{300},
		stats: Stats{Reissues: 1, ImpliedExits: 1},
	}, {
		name: "late exit of an implied exit",
		evs: []events.Event{
			fork(300, tk(10, 70), 1, token.Token{}, 1*sec),
			fork(300, tk(20, 80), 1, token.Token{}, 2*sec),
			exit(300, tk(10, 70), 3<<8, 1*sec+500*ms),
		},
		nodes: []wantNode{
			{pid: 300, tok: tk(10, 70), status: 3 << 8, has: Exited | ExitObserved, hasNot: ExitImplied},
		},
		live:  []int32{300},
		stats: Stats{OutOfOrder: 1},
	}, {
		name: "exit before fork of the same instance",
		evs: []events.Event{
			exit(400, tk(30, 90), 0, 3*sec),
			fork(400, tk(30, 90), 1, token.Token{}, 2*sec),
		},
		nodes: []wantNode{
			{pid: 400, tok: tk(30, 90), ppid: 1, has: BornObserved | Exited | ExitObserved},
		},
		live:  []int32{},
		stats: Stats{UnknownExits: 1, OutOfOrder: 1},
	}, {
		name: "exit of a newer instance before its fork implies the live one exited",
		evs: []events.Event{
			fork(400, tk(10, 85), 1, token.Token{}, 1*sec),
			exit(400, tk(30, 90), 0, 3*sec),
			fork(400, tk(30, 90), 1, token.Token{}, 2*sec),
		},
		nodes: []wantNode{
			{pid: 400, tok: tk(10, 85), has: Exited | ExitImplied},
			{pid: 400, tok: tk(30, 90), has: BornObserved | Exited | ExitObserved},
		},
		live:  []int32{},
		stats: Stats{UnknownExits: 1, ImpliedExits: 1, Reissues: 1},
	}, {
		name: "late fork of an older instance does not displace the live one",
		evs: []events.Event{
			fork(500, tk(20, 95), 1, token.Token{}, 2*sec),
			fork(500, tk(10, 94), 1, token.Token{}, 1*sec),
		},
		nodes: []wantNode{
			{pid: 500, tok: tk(20, 95), hasNot: Exited},
			{pid: 500, tok: tk(10, 94), has: BornObserved | Exited | ExitImplied},
		},
		live:  []int32{500},
		stats: Stats{OutOfOrder: 1},
	}, {
		name: "same tick, newer pidfs inode",
		evs: []events.Event{
			fork(600, tk(10, 100), 1, token.Token{}, 0),
			exit(600, tk(10, 100), 0, 0),
			fork(600, tk(10, 101), 1, token.Token{}, 0),
		},
		nodes: []wantNode{
			{pid: 600, tok: tk(10, 100), has: Exited | ExitObserved},
			{pid: 600, tok: tk(10, 101), hasNot: Exited},
		},
		live:  []int32{600},
		stats: Stats{Reissues: 1},
	}, {
		name: "duplicates: fork of a seeded process, second exit",
		seed: []events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, shell, 1, initTok), proc(20, tk(150, 0), 1, initTok)},
		evs: []events.Event{
			// 20 was born from 10 and reparented to init before the scan.
			fork(20, tk(150, 0), 10, shell, 1500*ms),
			fork(20, tk(150, 0), 10, shell, 1500*ms),
			exit(20, tk(150, 0), 0, 2*sec),
			exit(20, tk(150, 0), 0, 2*sec),
		},
		nodes: []wantNode{
			{pid: 20, tok: tk(150, 0), ppid: 10, has: BornObserved | Exited | ExitObserved},
		},
		live:  []int32{1, 10},
		stats: Stats{Duplicates: 3, Forks: 2},
	}, {
		name: "exec of an instance whose fork was missed",
		evs: []events.Event{
			fork(700, tk(10, 5), 1, token.Token{}, 1*sec),
			execEv(700, tk(40, 9), "make"),
		},
		nodes: []wantNode{
			{pid: 700, tok: tk(10, 5), has: Exited | ExitImplied},
			{pid: 700, tok: tk(40, 9), has: Execed, hasNot: BornObserved | Exited},
		},
		live:  []int32{700},
		stats: Stats{Reissues: 1, ImpliedExits: 1},
	}, {
		name: "poller events are inferred, never observed",
		evs: []events.Event{
			{Kind: events.Fork, Mechanism: events.ProcPoll, Inferred: true, Pid: 800, Token: tk(10, 0), PPid: 1},
			{Kind: events.Exit, Mechanism: events.ProcPoll, Inferred: true, Pid: 800, Token: tk(10, 0)},
		},
		nodes: []wantNode{
			{pid: 800, tok: tk(10, 0), ppid: 1, has: Inferred | Exited | ExitImplied, hasNot: BornObserved | ExitObserved},
		},
		live: []int32{},
	}, {
		name: "malformed and other-boot events change nothing",
		evs: []events.Event{
			{Kind: events.Fork, Pid: 0, Token: tk(1, 1)},
			{Kind: events.Fork, Pid: 5, Token: token.Token{Boot: [16]byte{9}, Start: 1, Prec: token.Ticks}},
			{Kind: 99, Pid: 5},
		},
		live:  []int32{},
		stats: Stats{OtherBoot: 1, Malformed: 2},
	}, {
		name: "fork teaches a seeded node its pidfs inode",
		seed: []events.Proc{proc(1, initTok, 0, token.Token{}), proc(20, tk(150, 0), 1, initTok)},
		evs: []events.Event{
			fork(20, tk(150, 777), 1, initTok, 1500*ms),
		},
		nodes: []wantNode{
			{pid: 20, tok: tk(150, 777), has: BornObserved},
		},
		live:  []int32{1, 20},
		stats: Stats{Duplicates: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGraph(newClock(), Config{})
			if tt.seed != nil {
				g.Seed(tt.seed)
			}
			apply(g, tt.evs...)
			mustCheck(t, g)
			for _, w := range tt.nodes {
				n, m, ok := g.Find(w.pid, w.tok)
				// A ticks-only token is never proven Same by itself.
				if !ok || (m != token.Same && w.tok.Ino != 0) || (m != token.Unproven && w.tok.Ino == 0) {
					t.Errorf("Find(%d, %v) = %v, %v, want a node", w.pid, w.tok, m, ok)
					continue
				}
				if !n.Flags.Has(w.has) || n.Flags&w.hasNot != 0 {
					t.Errorf("Find(%d, %v).Flags = %v, want %v set and %v clear", w.pid, w.tok, n.Flags, w.has, w.hasNot)
				}
				if w.ppid != 0 && n.PPid != w.ppid {
					t.Errorf("Find(%d, %v).PPid = %d, want %d", w.pid, w.tok, n.PPid, w.ppid)
				}
				if n.Flags.Has(ExitObserved) && n.ExitStatus != w.status {
					t.Errorf("Find(%d, %v).ExitStatus = %d, want %d", w.pid, w.tok, n.ExitStatus, w.status)
				}
			}
			if tt.live != nil {
				var live []int32
				g.mu.RLock()
				for pid, i := range g.pids.All() {
					if g.at(i).live() {
						live = append(live, pid)
					}
				}
				g.mu.RUnlock()
				slices.Sort(live)
				if !slices.Equal(live, tt.live) {
					t.Errorf("live pids = %v, want %v", live, tt.live)
				}
			}
			compareStats(t, g.Stats(), tt.stats)
		})
	}
}

// compareStats compares the counters want sets (non-zero).
func compareStats(t *testing.T, got, want Stats) {
	t.Helper()
	pairs := []struct {
		name      string
		got, want uint64
	}{
		{"Exited", uint64(got.Exited), uint64(want.Exited)},
		{"Pinned", uint64(got.Pinned), uint64(want.Pinned)},
		{"Forks", got.Forks, want.Forks},
		{"Execs", got.Execs, want.Execs},
		{"Exits", got.Exits, want.Exits},
		{"Duplicates", got.Duplicates, want.Duplicates},
		{"Reissues", got.Reissues, want.Reissues},
		{"ImpliedExits", got.ImpliedExits, want.ImpliedExits},
		{"UnknownExits", got.UnknownExits, want.UnknownExits},
		{"Unattributed", got.Unattributed, want.Unattributed},
		{"OutOfOrder", got.OutOfOrder, want.OutOfOrder},
		{"Gaps", got.Gaps, want.Gaps},
		{"OtherBoot", got.OtherBoot, want.OtherBoot},
		{"Malformed", got.Malformed, want.Malformed},
	}
	for _, p := range pairs {
		if p.want != 0 && p.got != p.want {
			t.Errorf("Stats().%s = %d, want %d", p.name, p.got, p.want)
		}
	}
}

func TestDoubleForkDescendants(t *testing.T) {
	g := newTestGraph(newClock(), Config{})
	initTok, shell := tk(1, 1), tk(100, 50)
	g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, shell, 1, initTok)})
	mid, gc := tk(200, 61), tk(201, 62)
	apply(g,
		fork(11, mid, 10, shell, 2*sec),
		fork(12, gc, 11, mid, 2*sec+5*ms),
		exit(11, mid, 0, 2*sec+6*ms),
	)
	d, err := g.Descendants(10, shell)
	if err != nil {
		t.Fatalf("Descendants(10) error %v", err)
	}
	if got := pids(d); !slices.Equal(got, []int32{12}) {
		t.Errorf("Descendants(10) = %v, want [12] (the adopted grandchild)", got)
	}
	a, err := g.Ancestors(12, gc)
	if err != nil {
		t.Fatalf("Ancestors(12) error %v", err)
	}
	if got := pids(a); !slices.Equal(got, []int32{11, 10, 1}) {
		t.Errorf("Ancestors(12) = %v, want [11 10 1]", got)
	}
	if len(a) > 0 && !a[0].Flags.Has(Exited) {
		t.Errorf("Ancestors(12)[0].Flags = %v, want exited", a[0].Flags)
	}
	// The middle process stays while its grandchild lives, through any
	// amount of retention pressure...
	g2 := g
	for k := range 3 * DefaultMaxExited {
		pid := int32(1000 + k)
		apply(g2, fork(pid, tk(uint64(1000+k), 0), 10, shell, 0), exit(pid, tk(uint64(1000+k), 0), 0, 0))
	}
	if _, _, ok := g.Find(11, mid); !ok {
		t.Fatalf("middle process evicted while its child lives")
	}
	// ...and becomes an ordinary exited node once the grandchild exits.
	apply(g, exit(12, gc, 0, 3*sec))
	if s := g.Stats(); s.Pinned != 0 {
		t.Errorf("Stats().Pinned = %d after the last descendant exited, want 0", s.Pinned)
	}
	mustCheck(t, g)
}

func TestReissueWatch(t *testing.T) {
	c := newClock()
	g := newTestGraph(c, Config{})
	old, fresh := tk(500, 900), tk(900, 950)
	apply(g, fork(4242, old, 1, token.Token{}, 5*sec))
	c.Advance(time.Second)
	apply(g, exit(4242, old, 0, 6*sec))
	exitAt := c.Now()
	c.Advance(time.Second)
	apply(g, fork(4242, fresh, 1, token.Token{}, 9*sec))

	w, ok := g.Watch(4242, old)
	if !ok {
		t.Fatalf("Watch(4242, old) not found")
	}
	if w.Node.Live() || !w.Node.Flags.Has(ExitObserved) || !w.Node.ExitedAt.Equal(exitAt) {
		t.Errorf("Watch(old).Node = %+v, want exited (observed) at %v", w.Node, exitAt)
	}
	if w.Successor == nil || w.Successor.Token != fresh {
		t.Fatalf("Watch(old).Successor = %v, want the new generation", w.Successor)
	}
	reason, ok := w.Reissue()
	if !ok || !strings.HasPrefix(reason, "pid reissued: exit of 4242@"+old.String()+" observed at ") {
		t.Errorf("Watch(old).Reissue() = %q, %v", reason, ok)
	}
	w, ok = g.Watch(4242, fresh)
	if !ok || w.Predecessor == nil || w.Predecessor.Token != old || !w.Node.Live() {
		t.Errorf("Watch(new) = %+v, %v, want live with the old generation as predecessor", w, ok)
	}
	if _, ok := w.Reissue(); ok {
		t.Errorf("Watch(new).Reissue() reported a reissue of a live node")
	}
	if n, _ := g.Live(4242); n.Token != fresh {
		t.Errorf("Live(4242).Token = %v, want %v", n.Token, fresh)
	}
	if s := g.Stats(); s.Reissues != 1 {
		t.Errorf("Stats().Reissues = %d, want 1", s.Reissues)
	}
}

func TestZeroTokenExit(t *testing.T) {
	tests := []struct {
		name     string
		seed     []events.Proc
		evs      []events.Event
		exitTime uint64
		// which token the exit must land on; zero means none
		want          token.Token
		unattributed  bool
		liveLosesCont bool
	}{{
		name: "attributed to the generation whose lifetime contains it",
		evs: []events.Event{
			fork(700, tk(100, 10), 1, token.Token{}, 1*sec),
			fork(700, tk(300, 20), 1, token.Token{}, 3*sec), // implies 100 exited
		},
		exitTime: 2 * sec,
		want:     tk(100, 10),
	}, {
		name: "after the live generation was born",
		evs: []events.Event{
			fork(700, tk(100, 10), 1, token.Token{}, 1*sec),
			exit(700, tk(100, 10), 0, 2*sec),
			fork(700, tk(300, 20), 1, token.Token{}, 3*sec),
		},
		exitTime: 4 * sec,
		want:     tk(300, 20),
	}, {
		name: "before any generation the graph saw",
		evs: []events.Event{
			fork(700, tk(300, 20), 1, token.Token{}, 3*sec),
		},
		exitTime:      2 * sec,
		unattributed:  true,
		liveLosesCont: true,
	}, {
		name: "inside the birth tick of a seeded process",
		seed: []events.Proc{proc(700, tk(300, 0), 1, token.Token{})},
		// seeded: born somewhere in [3s, 3.01s)
		exitTime:     3*sec + 5*ms,
		unattributed: true,
	}, {
		name:     "after the birth tick of a seeded process",
		seed:     []events.Proc{proc(700, tk(300, 0), 1, token.Token{})},
		exitTime: 3*sec + 20*ms,
		want:     tk(300, 0),
	}, {
		name: "no time, no token",
		evs: []events.Event{
			fork(700, tk(300, 20), 1, token.Token{}, 3*sec),
		},
		exitTime:      0,
		unattributed:  true,
		liveLosesCont: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGraph(newClock(), Config{})
			if tt.seed != nil {
				g.Seed(tt.seed)
			}
			apply(g, tt.evs...)
			before, _ := g.Live(700)
			apply(g, events.Event{Kind: events.Exit, Mechanism: events.Netlink, Pid: 700, Status: 1 << 8, Time: tt.exitTime})
			mustCheck(t, g)
			if got := g.Stats().Unattributed; (got == 1) != tt.unattributed {
				t.Errorf("Stats().Unattributed = %d, want unattributed %v", got, tt.unattributed)
			}
			if !tt.want.IsZero() {
				n, _, ok := g.Find(700, tt.want)
				if !ok || !n.Flags.Has(ExitObserved) || n.ExitStatus != 1<<8 || n.BootExit != time.Duration(tt.exitTime) {
					t.Errorf("Find(700, %v) = %+v, want the exit attributed to it", tt.want, n)
				}
			}
			if tt.unattributed && before.Live() {
				after, ok := g.Live(700)
				if !ok || after.Token != before.Token {
					t.Errorf("Live(700) = %v, %v after an unattributed exit, want %v still live", after, ok, before.Token)
				}
				w, _ := g.Watch(700, after.Token)
				if tt.liveLosesCont && w.Continuous {
					t.Errorf("Watch(700).Continuous = true after an unattributed exit, want false")
				}
			}
		})
	}
}

func TestLostOpensGap(t *testing.T) {
	c := newClock()
	g := newTestGraph(c, Config{})
	a, b, early := tk(100, 1), tk(200, 2), tk(50, 3)
	apply(g, fork(10, early, 1, token.Token{}, 0), exit(10, early, 0, 0))
	born := c.Now()
	apply(g, fork(20, a, 1, token.Token{}, 0))
	w, _ := g.Watch(20, a)
	if !w.Continuous || !w.Since.Equal(born) || !w.Node.Flags.Has(BornObserved) {
		t.Errorf("before the gap: Watch(20) = %+v, want continuous since %v", w, born)
	}
	c.Advance(time.Second)
	gapAt := c.Now()
	apply(g, lost(7))
	c.Advance(time.Second)
	bBorn := c.Now()
	apply(g, fork(30, b, 1, token.Token{}, 0))

	tests := []struct {
		pid   int32
		tok   token.Token
		cont  bool
		since time.Time
	}{
		{20, a, false, gapAt},   // live across the gap
		{30, b, true, bBorn},    // born after it
		{10, early, true, born}, // exited before it
	}
	check := func(when string) {
		for _, tt := range tests {
			w, ok := g.Watch(tt.pid, tt.tok)
			if !ok || w.Continuous != tt.cont || !w.Since.Equal(tt.since) {
				t.Errorf("%s: Watch(%d) = continuous %v since %v, want %v since %v", when, tt.pid, w.Continuous, w.Since, tt.cont, tt.since)
			}
		}
	}
	check("after the gap")
	// An exit after the gap freezes what the gap did.
	c.Advance(time.Second)
	apply(g, exit(20, a, 0, 0))
	check("after exit")
	if s := g.Stats(); s.Gaps != 1 || s.LostEvents != 7 {
		t.Errorf("Stats() gaps %d lost %d, want 1 and 7", s.Gaps, s.LostEvents)
	}
}

func TestResync(t *testing.T) {
	c := newClock()
	g := newTestGraph(c, Config{})
	initTok, a, b, newc := tk(1, 0), tk(100, 0), tk(200, 0), tk(300, 0)
	g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, a, 1, initTok), proc(20, b, 1, initTok)})
	apply(g, lost(0))
	c.Advance(time.Minute)
	at := c.Now()
	// 20 exited and 30 was born (child of 10) during the loss; pid 10 was
	// not touched.
	g.Resync([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, a, 1, initTok), proc(30, newc, 10, a)})
	mustCheck(t, g)
	if n, _, ok := g.Find(20, b); !ok || !n.Flags.Has(Exited|ExitImplied) || n.Flags.Has(ExitObserved) {
		t.Errorf("Find(20) = %+v, %v, want exit implied", n, ok)
	}
	w, ok := g.Watch(30, newc)
	if !ok || w.Node.Flags.Has(BornObserved) || w.Continuous || !w.Since.Equal(at) || w.Node.PPid != 10 {
		t.Errorf("Watch(30) = %+v, want unobserved birth, parent 10, since %v", w, at)
	}
	w, _ = g.Watch(10, a)
	if w.Continuous || !w.Since.Equal(at) || !w.Node.Live() {
		t.Errorf("Watch(10) = %+v, want live, watched since the resync %v", w, at)
	}
	d, _ := g.Descendants(10, a)
	if got := pids(d); !slices.Equal(got, []int32{30}) {
		t.Errorf("Descendants(10) = %v, want [30]", got)
	}
	if s := g.Stats(); s.Gaps != 2 || s.Live != 3 {
		t.Errorf("Stats() = %+v, want 2 gaps and 3 live", s)
	}
}

// memberAfterLoss seeds a graph with init and pid 10 (token m), admits 10
// as claim g-claim's root, and applies a loss; x is a token for a process
// the tests add after it.
func memberAfterLoss(t *testing.T) (c *clock, g *Graph, initTok, m, x token.Token) {
	t.Helper()
	c = newClock()
	g = newTestGraph(c, Config{})
	initTok, m, x = tk(1, 0), tk(100, 0), tk(300, 0)
	g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, m, 1, initTok)})
	if err := g.Admit(10, m, "g-claim"); err != nil {
		t.Fatal(err)
	}
	apply(g, lost(1))
	return c, g, initTok, m, x
}

// TestResyncParentNotListed: a process a resync adds whose parent the
// same scan did not list (the parent exited while the scan ran) is linked
// to nothing, not to the graph's record at the parent's pid: that record
// may be an instance whose exit the loss hid, whose pid went to the real
// parent (a review's member M exited in a loss, a stranger took its pid
// and forked X, then exited before the scan reached it, and X became a
// member of M's claim).
func TestResyncParentNotListed(t *testing.T) {
	c, g, initTok, m, x := memberAfterLoss(t)
	c.Advance(time.Minute)
	g.Resync([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(300, x, 10, token.Token{})})
	mustCheck(t, g)
	if d, _ := g.Descendants(10, m); len(d) != 0 {
		t.Errorf("Descendants(10) = %v, want none: 300's parent was not listed", pids(d))
	}
	if root, _, ok := g.RootOf(300, x); ok {
		t.Errorf("RootOf(300) = %q, want none", root)
	}
}

// TestExecOfUnseenBirthUnlinked: an exec of a process whose fork the
// graph never saw (lost) records it, linked to no parent: its parent of
// now is no proof of birth (an orphan a member adopted as a pid
// namespace's init or a subreaper), so it is no member of the parent's
// claim, with or without the parent's token.
func TestExecOfUnseenBirthUnlinked(t *testing.T) {
	for _, withToken := range []bool{false, true} {
		_, g, _, m, x := memberAfterLoss(t)
		ev := events.Event{Kind: events.Exec, Pid: 30, Token: x, PPid: 10, Time: 400}
		if withToken {
			ev.ParentToken = m
		}
		apply(g, ev)
		mustCheck(t, g)
		if _, _, ok := g.Find(30, x); !ok {
			t.Fatalf("parent token %v: the exec'd process was not recorded", withToken)
		}
		if root, _, ok := g.RootOf(30, x); ok {
			t.Errorf("parent token %v: RootOf(30) = %q, want none: its birth was not seen", withToken, root)
		}
	}
}

func TestFindMatch(t *testing.T) {
	g := newTestGraph(newClock(), Config{})
	g.Seed([]events.Proc{proc(50, tk(100, 0), 1, token.Token{})})
	tests := []struct {
		name  string
		claim token.Token
		match token.Match
		ok    bool
	}{
		{"ticks only on both sides", tk(100, 0), token.Unproven, true},
		{"claim with an inode, node without", tk(100, 9), token.Unproven, true},
		{"other start", tk(101, 0), token.Different, false},
		{"other boot", token.Token{Start: 100, Prec: token.Ticks, Boot: [16]byte{1}}, token.OtherBoot, false},
		{"zero token", token.Token{}, token.Unproven, false},
	}
	for _, tt := range tests {
		_, m, ok := g.Find(50, tt.claim)
		if m != tt.match || ok != tt.ok {
			t.Errorf("%s: Find(50, %v) = %v, %v, want %v, %v", tt.name, tt.claim, m, ok, tt.match, tt.ok)
		}
	}
	// An eBPF fork event teaches the inode: now the token proves it.
	apply(g, fork(50, tk(100, 9), 1, token.Token{}, 0))
	if _, m, ok := g.Find(50, tk(100, 9)); m != token.Same || !ok {
		t.Errorf("after the inode is known: Find(50) = %v, %v, want same", m, ok)
	}
	if _, m, ok := g.Find(50, tk(100, 8)); m != token.Different || ok {
		t.Errorf("Find(50, other inode) = %v, %v, want different", m, ok)
	}
	// Two instances in one tick: a ticks-only claim cannot pick.
	apply(g, exit(50, tk(100, 9), 0, 0), fork(50, tk(100, 12), 1, token.Token{}, 0))
	w, ok := g.Watch(50, tk(100, 0))
	if !ok || w.Match != token.Unproven || !w.Ambiguous {
		t.Errorf("Watch(50, ticks only) = %v, ambiguous %v, want unproven and ambiguous", w.Match, w.Ambiguous)
	}
	if _, err := g.Descendants(50, tk(100, 0)); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("Descendants(50, ticks only) error = %v, want ErrAmbiguous", err)
	}
	if _, err := g.Descendants(51, tk(100, 0)); !errors.Is(err, ErrNotFound) {
		t.Errorf("Descendants(51) error = %v, want ErrNotFound", err)
	}
}

func TestRootOf(t *testing.T) {
	g := newTestGraph(newClock(), Config{})
	initTok, job := tk(1, 1), tk(100, 10)
	g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(40, job, 1, initTok), proc(41, tk(101, 0), 40, job)})
	if err := g.Admit(40, job, "job-1"); err != nil {
		t.Fatalf("Admit(40) error %v", err)
	}
	child, grandchild := tk(200, 20), tk(300, 30)
	apply(g,
		fork(42, child, 40, job, 0),
		fork(43, grandchild, 42, child, 0),
		exit(40, job, 0, 0),
		// pid 40 reissued to a stranger forked by init
		fork(40, tk(400, 40), 1, initTok, 0),
		// a process born from the stranger
		fork(44, tk(401, 41), 40, tk(400, 40), 0),
	)
	tests := []struct {
		pid      int32
		tok      token.Token
		root     string
		observed bool
		ok       bool
	}{
		{40, job, "job-1", true, true},
		{41, tk(101, 0), "job-1", false, true}, // seeded: lineage not observed
		{42, child, "job-1", true, true},
		{43, grandchild, "job-1", true, true},
		{40, tk(400, 40), "", false, false}, // the reissued pid inherits nothing
		{44, tk(401, 41), "", false, false},
		{1, initTok, "", false, false},
	}
	for _, tt := range tests {
		root, observed, ok := g.RootOf(tt.pid, tt.tok)
		if root != tt.root || observed != tt.observed || ok != tt.ok {
			t.Errorf("RootOf(%d, %v) = %q, %v, %v, want %q, %v, %v", tt.pid, tt.tok, root, observed, ok, tt.root, tt.observed, tt.ok)
		}
	}
	if err := g.Admit(42, child, "job-1"); err != nil {
		t.Errorf("Admit(42) under its own root's name error %v", err)
	}
	if err := g.Admit(42, child, "job-1"); err != nil {
		t.Errorf("Admit(42) again error %v, want nil", err)
	}
	if err := g.Admit(42, child, "job-2"); !errors.Is(err, ErrConflict) {
		t.Errorf("Admit(42) under another root error %v, want ErrConflict", err)
	}
	if err := g.Admit(40, job, "job-3"); !errors.Is(err, ErrExited) {
		t.Errorf("Admit(exited) error %v, want ErrExited", err)
	}
	if err := g.Admit(99, tk(1, 0), "job-3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Admit(unknown) error %v, want ErrNotFound", err)
	}
}

func TestRetentionStorm(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	g := newTestGraph(newClock(), Config{MaxExited: 1024})
	parent := tk(1, 1)
	g.Seed([]events.Proc{proc(1, parent, 0, token.Token{})})
	live := g.Stats().Live
	bound := live + 1 + 1024
	for k := range n {
		pid := int32(100 + k%40000)
		tok := tk(uint64(1000+k), uint64(1000+k))
		f, e := fork(pid, tok, 1, parent, 0), exit(pid, tok, 0, 0)
		g.Apply(&f)
		if l := g.Len(); l > bound {
			t.Fatalf("after %d forks: Len() = %d, want <= %d", k, l, bound)
		}
		g.Apply(&e)
		if l := g.Len(); l > bound-1 {
			t.Fatalf("after %d exits: Len() = %d, want <= %d", k, l, bound-1)
		}
	}
	mustCheck(t, g)
	s := g.Stats()
	if s.Exited != 1024 || s.Evicted != uint64(n-1024) {
		t.Errorf("Stats() = %+v, want 1024 exited retained and %d evicted", s, n-1024)
	}
	// Slots are recycled: storage did not grow past the bound.
	if got := g.s.n; got > uint32(bound+1) {
		t.Errorf("slot high-water mark %d, want <= %d", got, bound+1)
	}
}

func TestRetentionAge(t *testing.T) {
	c := newClock()
	g := newTestGraph(c, Config{MaxExitedAge: time.Minute})
	apply(g, fork(10, tk(1, 1), 0, token.Token{}, 0), exit(10, tk(1, 1), 0, 0))
	c.Advance(30 * time.Second)
	apply(g, fork(11, tk(2, 2), 0, token.Token{}, 0), exit(11, tk(2, 2), 0, 0))
	c.Advance(31 * time.Second)
	g.Expire()
	if _, _, ok := g.Find(10, tk(1, 1)); ok {
		t.Errorf("node exited 61s ago still held with MaxExitedAge 1m")
	}
	if _, _, ok := g.Find(11, tk(2, 2)); !ok {
		t.Errorf("node exited 31s ago dropped with MaxExitedAge 1m")
	}
	mustCheck(t, g)
}

func TestMaxPinnedElides(t *testing.T) {
	g := newTestGraph(newClock(), Config{MaxPinned: 8})
	top := tk(1, 1)
	g.Seed([]events.Proc{proc(1, top, 0, token.Token{})})
	// A chain where each process forks one child and exits: every exited
	// link is needed by the live leaf.
	ppid, ptok := int32(1), top
	for k := range 100 {
		pid, tok := int32(10+k), tk(uint64(10+k), uint64(10+k))
		apply(g, fork(pid, tok, ppid, ptok, 0))
		if k > 0 {
			apply(g, exit(ppid, ptok, 0, 0))
		}
		ppid, ptok = pid, tok
	}
	mustCheck(t, g)
	s := g.Stats()
	if s.Pinned != 8 || s.Elided != 99-8 {
		t.Errorf("Stats() pinned %d elided %d, want 8 and %d", s.Pinned, s.Elided, 99-8)
	}
	d, err := g.Descendants(1, top)
	if err != nil || !slices.Equal(pids(d), []int32{ppid}) {
		t.Errorf("Descendants(1) = %v, %v, want the live leaf %d", pids(d), err, ppid)
	}
	a, _ := g.Ancestors(ppid, ptok)
	if len(a) != 9 || !slices.ContainsFunc(a, func(n Node) bool { return n.Flags.Has(AncestryElided) }) {
		t.Errorf("Ancestors(leaf) = %v, want 8 pinned links and init, one marked elided", pids(a))
	}
}

// TestConcurrentQueries runs queries against Apply; it asserts the
// invariants hold afterwards and exists mostly for the race detector.
func TestConcurrentQueries(t *testing.T) {
	g := newTestGraph(newClock(), Config{MaxExited: 64})
	g.Seed([]events.Proc{proc(1, tk(1, 1), 0, token.Token{})})
	done := make(chan struct{})
	var found int
	go func() {
		defer close(done)
		for k := range 20000 {
			pid := int32(100 + k%500)
			if _, _, ok := g.Find(pid, tk(uint64(1000+k), uint64(1000+k))); ok {
				found++
			}
			g.Descendants(1, tk(1, 1))
			g.Watch(pid, tk(uint64(1000+k), 0))
			g.Stats()
		}
	}()
	for k := range 20000 {
		pid := int32(100 + k%500)
		tok := tk(uint64(1000+k), uint64(1000+k))
		apply(g, fork(pid, tok, 1, tk(1, 1), 0), exit(pid, tok, 0, 0))
	}
	<-done
	mustCheck(t, g)
	if g.Stats().Forks != 20000 {
		t.Errorf("Stats().Forks = %d, want 20000", g.Stats().Forks)
	}
}

// TestIsToken: isToken agrees with comparing tokenOf's whole token, for
// tokens that differ from a node's in each field, and for a node without
// one.
func TestIsToken(t *testing.T) {
	g := newTestGraph(newClock(), Config{})
	other := testBoot
	other[3]++
	with := &node{start: 500, ino: 900, prec: token.Ticks}
	without := &node{}
	for _, tok := range []token.Token{
		tk(500, 900), tk(501, 900), tk(500, 901), tk(500, 0),
		{Boot: other, Start: 500, Ino: 900, Prec: token.Ticks},
		{Boot: testBoot, Start: 500, Ino: 900, Prec: token.Micro},
		{Boot: testBoot, Start: 500, Ino: 900, Prec: token.Ticks, Uniq: 1},
		{}, {Start: 1}, {Boot: testBoot},
	} {
		for _, n := range []*node{with, without} {
			if got, want := g.isToken(n, &tok), g.tokenOf(n) == tok; got != want {
				t.Errorf("isToken(%+v, %+v) = %v, want %v", *n, tok, got, want)
			}
		}
	}
	if !g.isToken(with, &token.Token{Boot: testBoot, Start: 500, Ino: 900, Prec: token.Ticks}) {
		t.Error("a node's own token is not its token")
	}
}

// TestRootNamesCompacted: the names of admitted roots whose processes have
// all expired are dropped, so a daemon admitting claim after claim keeps
// a bounded table; a root still in the graph keeps its name through the
// renumbering, and its children born after it inherit it.
func TestRootNamesCompacted(t *testing.T) {
	c := newClock()
	g := newTestGraph(c, Config{MaxExited: 16, MaxPinned: 16})
	initTok := tk(1, 1)
	g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{})})
	keep := tk(2, 2)
	apply(g, fork(2, keep, 1, initTok, 0))
	if err := g.Admit(2, keep, "keep"); err != nil {
		t.Fatal(err)
	}
	start := uint64(10)
	for k := range 10 * minRootsCompacted {
		pid := int32(100 + k%1000)
		tok := tk(start, start)
		start++
		apply(g, fork(pid, tok, 1, initTok, 0))
		if err := g.Admit(pid, tok, fmt.Sprintf("g-%d", k)); err != nil {
			t.Fatalf("Admit %d: %v", k, err)
		}
		apply(g, exit(pid, tok, 0, 0))
	}
	g.mu.RLock()
	n := len(g.roots)
	g.mu.RUnlock()
	if n > 2*minRootsCompacted+1 {
		t.Errorf("%d root names kept after %d admitted and gone, want at most %d", n, 10*minRootsCompacted, 2*minRootsCompacted+1)
	}
	child := tk(start, start)
	apply(g, fork(3, child, 2, keep, 0))
	for _, p := range []struct {
		pid int32
		tok token.Token
	}{{2, keep}, {3, child}} {
		if root, _, ok := g.RootOf(p.pid, p.tok); !ok || root != "keep" {
			t.Errorf("RootOf(%d) = %q, %v after the compactions, want keep", p.pid, root, ok)
		}
	}
}
