package lineage

import (
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/boottime"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestStampedEventTimes: on the real clock an event is applied at its own
// stamp's wall time, not when Apply ran (an exit stamped 3 s ago exited 3 s
// ago); an unstamped one at the time of Apply.
func TestStampedEventTimes(t *testing.T) {
	boot, ok := boottime.Now()
	if !ok {
		t.Fatal("CLOCK_BOOTTIME unreadable")
	}
	g := New(Config{})
	old, other := tk(500, 900), tk(600, 901)
	apply(g, fork(4242, old, 1, token.Token{}, uint64(boot-int64(10*time.Second))))
	apply(g, exit(4242, old, 0, uint64(boot-int64(3*time.Second))))
	apply(g, fork(4343, other, 1, token.Token{}, 0))
	apply(g, exit(4343, other, 0, 0))
	now := time.Now()
	for _, tt := range []struct {
		name string
		pid  int32
		tok  token.Token
		want time.Time
	}{
		{"stamped", 4242, old, now.Add(-3 * time.Second)},
		{"unstamped", 4343, other, now},
	} {
		w, ok := g.Watch(tt.pid, tt.tok)
		if !ok {
			t.Fatalf("%s: not in the graph", tt.name)
		}
		if d := w.Node.ExitedAt.Sub(tt.want); d < -500*time.Millisecond || d > 500*time.Millisecond {
			t.Errorf("%s: exited at %v, want %v", tt.name, w.Node.ExitedAt, tt.want)
		}
	}
}
