package lineage

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

var testBoot = procfs.BootID{0xb0, 0x07, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}

// clock is an injected graph clock that tests advance by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestGraph(c *clock, cfg Config) *Graph {
	cfg.Now = c.Now
	cfg.Boot = testBoot
	return New(cfg)
}

// tk is a ticks token; ino 0 means no pidfs inode.
func tk(start, ino uint64) token.Token {
	return token.Token{Boot: testBoot, Start: start, Ino: ino, Prec: token.Ticks}
}

func comm(s string) (c [16]byte) {
	copy(c[:], s)
	return c
}

// pcomm names a test process after its pid, without allocating.
func pcomm(pid int32) (c [16]byte) {
	c[0] = 'p'
	strconv.AppendInt(c[1:1], int64(pid), 10)
	return c
}

// ev builders. Times are boottime ns; 0 for unknown.
func fork(pid int32, tok token.Token, ppid int32, ptok token.Token, t uint64) events.Event {
	return events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: pid, Token: tok, PPid: ppid, ParentToken: ptok, Time: t, Comm: pcomm(pid)}
}

func exit(pid int32, tok token.Token, status uint32, t uint64) events.Event {
	return events.Event{Kind: events.Exit, Mechanism: events.EBPF, Pid: pid, Token: tok, Status: status, Time: t}
}

func execEv(pid int32, tok token.Token, name string) events.Event {
	return events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: pid, Token: tok, Comm: comm(name)}
}

func lost(n uint64) events.Event { return events.Event{Kind: events.Lost, Count: n} }

func proc(pid int32, tok token.Token, ppid int32, ptok token.Token) events.Proc {
	return events.Proc{Pid: pid, PPid: ppid, Token: tok, ParentToken: ptok, Comm: pcomm(pid)}
}

func apply(g *Graph, evs ...events.Event) {
	for i := range evs {
		g.Apply(&evs[i])
	}
}

// check verifies the graph's structural invariants and returns the first
// violation.
func (g *Graph) check() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	reached := make(map[uint32]bool)
	live := 0
	for pid, head := range g.pids.All() {
		if head == 0 || head >= g.s.n {
			return fmt.Errorf("pid %d: head %d out of range", pid, head)
		}
		if g.at(head).newer != 0 {
			return fmt.Errorf("pid %d: head %d has a newer generation", pid, head)
		}
		var prev uint32
		for i, k := head, 0; i != 0; i, k = g.at(i).older, k+1 {
			n := g.at(i)
			if reached[i] {
				return fmt.Errorf("pid %d: node %d reached twice", pid, i)
			}
			reached[i] = true
			if n.list == onFree {
				return fmt.Errorf("pid %d: node %d is free", pid, i)
			}
			if n.pid != pid {
				return fmt.Errorf("node %d: pid %d in chain of %d", i, n.pid, pid)
			}
			if n.newer != prev {
				return fmt.Errorf("node %d: newer %d, want %d", i, n.newer, prev)
			}
			if n.live() {
				live++
				if k != 0 {
					return fmt.Errorf("pid %d: live node %d is not the newest generation", pid, i)
				}
			}
			prev = i
		}
	}
	if live != g.live {
		return fmt.Errorf("live count %d, want %d", g.live, live)
	}
	var lists [3]int
	for i := uint32(1); i < g.s.n; i++ {
		n := g.at(i)
		if n.list == onFree {
			continue
		}
		if !reached[i] {
			return fmt.Errorf("node %d (pid %d) not in any generation chain", i, n.pid)
		}
		want := onNone
		if !n.live() {
			want = onRetained
			if n.needKids > 0 {
				want = onPinned
			}
		}
		if n.list != want {
			return fmt.Errorf("node %d: on list %d, want %d", i, n.list, want)
		}
		if want != onNone {
			lists[want]++
		}
		var kids uint32
		var prev uint32
		for c := n.child; c != 0; c = g.at(c).next {
			cn := g.at(c)
			if cn.parent != i || cn.prev != prev || cn.list == onFree {
				return fmt.Errorf("node %d: bad child link to %d", i, c)
			}
			if cn.needed() {
				kids++
			}
			prev = c
		}
		if kids != n.needKids {
			return fmt.Errorf("node %d: needKids %d, want %d", i, n.needKids, kids)
		}
		// The birth parent chain terminates.
		p, steps := n.parent, uint32(0)
		for ; p != 0 && steps <= g.s.n; steps++ {
			p = g.at(p).parent
		}
		if p != 0 {
			return fmt.Errorf("node %d: parent chain does not terminate", i)
		}
	}
	for _, k := range []uint8{onRetained, onPinned} {
		if lists[k] != g.lists[k].n {
			return fmt.Errorf("list %d: count %d, want %d", k, g.lists[k].n, lists[k])
		}
		n := 0
		for i := g.lists[k].head; i != 0; i = g.at(i).lnext {
			n++
		}
		if n != lists[k] {
			return fmt.Errorf("list %d: walk %d, want %d", k, n, lists[k])
		}
	}
	if g.lists[onRetained].n > g.cfg.MaxExited || g.lists[onPinned].n > g.cfg.MaxPinned {
		return fmt.Errorf("retention over bounds: %d retained, %d pinned", g.lists[onRetained].n, g.lists[onPinned].n)
	}
	return nil
}

func mustCheck(t testing.TB, g *Graph) {
	t.Helper()
	if err := g.check(); err != nil {
		t.Fatal(err)
	}
}

func pids(ns []Node) []int32 {
	out := make([]int32, len(ns))
	for i, n := range ns {
		out[i] = n.Pid
	}
	return out
}
