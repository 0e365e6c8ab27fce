package lineage

import (
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestBlind: a tree's lineage has a hole where an instance, or a birth
// ancestor of it up to its admitted root, was not watched without a gap
// from birth; the root's own ancestors (init, seeded) do not count.
func TestBlind(t *testing.T) {
	initTok, root, child, grand := tk(1, 1), tk(100, 10), tk(110, 11), tk(120, 12)
	inst := func(pid int32, tok token.Token) token.Instance { return token.Instance{Pid: pid, Token: tok} }
	tests := []struct {
		name  string
		setup func(g *Graph, c *clock)
		ask   []token.Instance
		want  BlindCause // 0: no hole
		pid   int32
	}{{
		name: "observed from birth",
		setup: func(g *Graph, c *clock) {
			apply(g, fork(40, root, 1, initTok, 0), fork(41, child, 40, root, 0))
		},
		ask: []token.Instance{inst(40, root), inst(41, child)},
	}, {
		name: "a loss after the tree's last member exited",
		setup: func(g *Graph, c *clock) {
			apply(g, fork(40, root, 1, initTok, 0), fork(41, child, 40, root, 0), exit(41, child, 0, 0))
			apply(g, lost(3))
			apply(g, fork(42, grand, 40, root, 0))
		},
		ask: []token.Instance{inst(42, grand)},
		// The root lived across the loss: its walk up from 42 finds it.
		want: LostEvents, pid: 40,
	}, {
		name: "root lived across a loss",
		setup: func(g *Graph, c *clock) {
			apply(g, fork(40, root, 1, initTok, 0))
			c.Advance(time.Second)
			apply(g, lost(1))
		},
		ask:  []token.Instance{inst(40, root)},
		want: LostEvents, pid: 40,
	}, {
		name: "an exited ancestor lived across a loss, its child born after",
		setup: func(g *Graph, c *clock) {
			apply(g, fork(40, root, 1, initTok, 0), fork(41, child, 40, root, 0))
			apply(g, lost(1))
			apply(g, fork(42, grand, 41, child, 0), exit(41, child, 0, 0))
		},
		ask:  []token.Instance{inst(42, grand)},
		want: LostEvents, pid: 41,
	}, {
		name: "root seeded, not seen born",
		setup: func(g *Graph, c *clock) {
			g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(40, root, 1, initTok)})
		},
		ask:  []token.Instance{inst(40, root)},
		want: UnseenBirth, pid: 40,
	}, {
		name: "root inferred by a poller",
		setup: func(g *Graph, c *clock) {
			apply(g, events.Event{Kind: events.Fork, Mechanism: events.ProcPoll, Inferred: true, Pid: 40, Token: root, PPid: 1})
		},
		ask:  []token.Instance{inst(40, root)},
		want: InferredBirth, pid: 40,
	}, {
		name:  "unknown instance",
		setup: func(g *Graph, c *clock) {},
		ask:   []token.Instance{inst(40, root)},
		want:  NotHeld, pid: 40,
	}, {
		name: "admitted root's seeded parent is not its tree",
		setup: func(g *Graph, c *clock) {
			g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{})})
			apply(g, fork(40, root, 1, initTok, 0), fork(41, child, 40, root, 0))
			if err := g.Admit(40, root, "job-1"); err != nil {
				t.Fatal(err)
			}
		},
		ask: []token.Instance{inst(41, child)},
	}, {
		name: "a loss before the root was born",
		setup: func(g *Graph, c *clock) {
			apply(g, lost(1))
			c.Advance(time.Second)
			apply(g, fork(40, root, 1, initTok, 0))
		},
		ask: []token.Instance{inst(40, root)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			g := newTestGraph(c, Config{})
			tt.setup(g, c)
			if err := g.Admit(40, root, "job-1"); err != nil && tt.want != NotHeld {
				t.Fatalf("Admit: %v", err)
			}
			b, ok := g.Blind(tt.ask)
			if tt.want == 0 {
				if ok {
					t.Fatalf("Blind = %+v, want no hole", b)
				}
				return
			}
			if !ok || b.Cause != tt.want || b.Pid != tt.pid {
				t.Fatalf("Blind = %+v, %v; want cause %d at pid %d", b, ok, tt.want, tt.pid)
			}
		})
	}
}
