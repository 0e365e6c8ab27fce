package lineage

import (
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

func TestChildless(t *testing.T) {
	init1 := tk(1, 1)
	p, c, g2 := tk(100, 10), tk(101, 11), tk(102, 12)
	tests := []struct {
		name string
		evs  []events.Event
		pid  int32
		tok  token.Token
		want bool
	}{
		{name: "exited without a child", evs: []events.Event{fork(10, p, 1, init1, 1), exit(10, p, 0, 2)}, pid: 10, tok: p, want: true},
		{name: "live", evs: []events.Event{fork(10, p, 1, init1, 1)}, pid: 10, tok: p},
		{name: "exited with a live child", evs: []events.Event{fork(10, p, 1, init1, 1), fork(11, c, 10, p, 2), exit(10, p, 0, 3)}, pid: 10, tok: p},
		{name: "exited with an exited child", evs: []events.Event{fork(10, p, 1, init1, 1), fork(11, c, 10, p, 2), exit(11, c, 0, 3), exit(10, p, 0, 4)}, pid: 10, tok: p},
		{name: "the child's own exit", evs: []events.Event{fork(10, p, 1, init1, 1), fork(11, c, 10, p, 2), exit(11, c, 0, 3)}, pid: 11, tok: c, want: true},
		{name: "grandchild keeps the middle", evs: []events.Event{fork(10, p, 1, init1, 1), fork(11, c, 10, p, 2), fork(12, g2, 11, c, 3), exit(11, c, 0, 4)}, pid: 11, tok: c},
		{name: "unknown instance", evs: []events.Event{fork(10, p, 1, init1, 1), exit(10, p, 0, 2)}, pid: 10, tok: tk(100, 99)},
		{name: "unknown pid", pid: 77, tok: p},
		{name: "token without inode is not exact", evs: []events.Event{fork(10, p, 1, init1, 1), exit(10, p, 0, 2)}, pid: 10, tok: tk(100, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGraph(newClock(), Config{})
			apply(g, tt.evs...)
			if got := g.Childless(tt.pid, tt.tok); got != tt.want {
				t.Errorf("Childless(%d, %v) = %v, want %v", tt.pid, tt.tok, got, tt.want)
			}
		})
	}
}
