package boottime

import (
	"testing"
	"time"
)

// TestWall converts stamps taken from the real clock: one of a moment 3 s
// ago must come out 3 s before now (a conversion that fell back to now, or
// added no offset, is off by seconds or by the uptime), and a zero stamp is
// now itself.
func TestWall(t *testing.T) {
	var c Clock
	boot, ok := Now()
	if !ok {
		t.Fatal("CLOCK_BOOTTIME unreadable")
	}
	now := time.Now()
	for _, tt := range []struct {
		name  string
		stamp uint64
		want  time.Time
		slack time.Duration
	}{
		{"3s ago", uint64(boot - int64(3*time.Second)), now.Add(-3 * time.Second), 500 * time.Millisecond},
		{"now", uint64(boot), now, 500 * time.Millisecond},
		{"unstamped", 0, now, 0},
	} {
		got := c.Wall(now, tt.stamp)
		if d := got.Sub(tt.want); d < -tt.slack || d > tt.slack {
			t.Errorf("%s: Wall(%d) = %v, want %v (within %v)", tt.name, tt.stamp, got, tt.want, tt.slack)
		}
	}
}

// TestResample: a sample is reused within Resample of when it was taken and
// replaced after.
func TestResample(t *testing.T) {
	var c Clock
	real := c.Offset(time.Now())
	if real == 0 {
		t.Fatal("no offset sampled")
	}
	at := time.Now()
	const fake = 12345
	c.offset.Store(fake)
	c.sampled.Store(at.UnixNano())
	if got := c.Offset(at.Add(Resample - time.Second)); got != fake {
		t.Errorf("within Resample: offset %d, want the sample %d", got, fake)
	}
	got := c.Offset(at.Add(Resample + time.Second))
	if d := got - real; d < -int64(time.Second) || d > int64(time.Second) {
		t.Errorf("after Resample: offset %d, want a new sample near %d", got, real)
	}
	if c.sampled.Load() != at.Add(Resample+time.Second).UnixNano() {
		t.Errorf("the new sample's time was not kept")
	}
}

// TestPin: a pinned offset converts every stamp with it, however late.
func TestPin(t *testing.T) {
	var c Clock
	c.Pin(1_000)
	far := time.Now().Add(1000 * time.Hour)
	if got, want := c.Wall(far, 500), time.Unix(0, 1_500); !got.Equal(want) {
		t.Errorf("pinned Wall = %v, want %v", got, want)
	}
}
