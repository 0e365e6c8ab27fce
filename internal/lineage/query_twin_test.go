package lineage

import (
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestTwinDropped: two generations at one pid that share a start (a pid
// the kernel gave again within one clock tick) make a token without an
// inode ambiguous, and stay so once the older one is dropped. Before, the
// graph then held one candidate, watched without a gap since its birth,
// and a claim on the dropped process was judged OWNED for the stranger
// (a review's root admit and release killed it).
func TestTwinDropped(t *testing.T) {
	const pid, parent = 100, 1
	const at = 500 * tickNs // the events' time: tick 500 starts
	ptok := tk(1, 1)
	for _, tt := range []struct {
		name string
		// bornAfterDrop: the twin forks only after the first is dropped.
		bornAfterDrop bool
		// byAge: the first is dropped by a wall-clock Expire that runs
		// ahead of the events (the reader behind), not by the cap.
		byAge bool
	}{
		{"twin held when the first is dropped", false, false},
		{"twin born after the first is dropped", true, false},
		{"twin born after a wall-clock expiry dropped the first", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			cfg := Config{MaxExited: 2}
			if tt.byAge {
				cfg = Config{MaxExitedAge: 100 * time.Millisecond}
			}
			g := newTestGraph(c, cfg)
			apply(g, fork(parent, ptok, 0, tk(0, 0), 0),
				fork(pid, tk(500, 10), parent, ptok, at+1000), exit(pid, tk(500, 10), 0, at+2000))
			twin := fork(pid, tk(500, 11), parent, ptok, at+5_000_000)
			if !tt.bornAfterDrop {
				apply(g, twin)
			}
			if tt.byAge {
				c.Advance(time.Second)
				g.Expire()
			} else {
				// Three more exits within the tick: the cap of 2 drops
				// the first.
				for p := int32(200); p < 203; p++ {
					apply(g, fork(p, tk(500, uint64(p)), parent, ptok, at+3000), exit(p, tk(500, uint64(p)), 0, at+4000))
				}
			}
			if _, ok := g.Watch(pid, tk(500, 10)); ok {
				t.Fatal("the first generation is still held")
			}
			if tt.bornAfterDrop {
				apply(g, twin)
			}
			w, ok := g.Watch(pid, tk(500, 0))
			if !ok || !w.Ambiguous {
				t.Errorf("a ticks-only token at a pid whose same-tick twin was dropped: found %v, ambiguous %v, want ambiguous", ok, w.Ambiguous)
			}
			if w, ok := g.Watch(pid, tk(500, 11)); !ok || w.Ambiguous || !w.Continuous {
				t.Errorf("the twin by its full token: found %v, ambiguous %v, continuous %v; want found whole", ok, w.Ambiguous, w.Continuous)
			}
			if err := g.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A generation at the pid with another start, dropped: no doubt.
	c := newClock()
	g := newTestGraph(c, Config{MaxExited: 1})
	apply(g, fork(parent, ptok, 0, tk(0, 0), 0),
		fork(pid, tk(400, 9), parent, ptok, 0), exit(pid, tk(400, 9), 0, 0),
		fork(pid, tk(500, 11), parent, ptok, 0))
	c.Advance(time.Second)
	apply(g, fork(300, tk(600, 300), parent, ptok, 0), exit(300, tk(600, 300), 0, 0))
	if w, ok := g.Watch(pid, tk(500, 0)); !ok || w.Ambiguous || !w.Continuous {
		t.Errorf("a ticks-only token whose pid's dropped generation started earlier: found %v, ambiguous %v, continuous %v; want found whole", ok, w.Ambiguous, w.Continuous)
	}
}

// TestUntokenedTwin: a generation at the pid without a token (a netlink
// fork whose child exited before its token could be read) whose fork came
// within the tick a later generation started in may be the instance a
// token without an inode names: the later one is ambiguous to it, while
// the first is held, once dropped, and when dropped before the later
// one's fork. One forked long before is no doubt. A fifth review's
// netlink daemon judged a stranger OWNED so, and root's admit and release
// killed it.
func TestUntokenedTwin(t *testing.T) {
	const pid, parent = 100, 1
	const at = 500 * tickNs
	ptok := tk(1, 1)
	untokened := func(forkAt uint64) []events.Event {
		f := fork(pid, token.Token{}, parent, ptok, forkAt)
		return []events.Event{f, exit(pid, token.Token{}, 0, forkAt+1000)}
	}
	for _, tt := range []struct {
		name      string
		forkAt    uint64 // the untokened one's fork
		drop      bool   // the untokened one is dropped (the cap)
		dropFirst bool   // ... before the twin's fork
		want      bool
	}{
		{"held, same tick", at + 1000, false, false, true},
		{"dropped after the twin's fork", at + 1000, true, false, true},
		{"dropped before the twin's fork", at + 1000, true, true, true},
		{"held, forked seconds before", at - 3_000_000_000, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			g := newTestGraph(c, Config{MaxExited: 2})
			apply(g, fork(parent, ptok, 0, tk(0, 0), 0))
			apply(g, untokened(tt.forkAt)...)
			twin := fork(pid, tk(500, 11), parent, ptok, at+5_000_000)
			if !tt.dropFirst {
				apply(g, twin)
			}
			if tt.drop {
				for p := int32(200); p < 203; p++ {
					apply(g, fork(p, tk(500, uint64(p)), parent, ptok, at+3000), exit(p, tk(500, uint64(p)), 0, at+4000))
				}
			}
			if tt.dropFirst {
				apply(g, twin)
			}
			w, ok := g.Watch(pid, tk(500, 0))
			if !ok || w.Ambiguous != tt.want {
				t.Errorf("a ticks-only token: found %v, ambiguous %v, want ambiguous %v", ok, w.Ambiguous, tt.want)
			}
			if err := g.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
