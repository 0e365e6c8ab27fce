package boottime

import (
	"testing"
	"time"
)

// TestAt converts stamps taken from the real clock: one of a moment 3 s
// ago must come out 3 s before now (a conversion that fell back to now, or
// added no offset, is off by seconds or by the uptime), and a zero stamp is
// the time of the call.
func TestAt(t *testing.T) {
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
	}{
		{"3s ago", uint64(boot - int64(3*time.Second)), now.Add(-3 * time.Second)},
		{"now", uint64(boot), now},
		{"unstamped", 0, now},
	} {
		got := c.At(tt.stamp)
		if d := got.Sub(tt.want); d < -500*time.Millisecond || d > 500*time.Millisecond {
			t.Errorf("%s: At(%d) = %v, want %v (within 500ms)", tt.name, tt.stamp, got, tt.want)
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

// TestPin: a pinned offset converts a stamp with it.
func TestPin(t *testing.T) {
	var c Clock
	c.Pin(1_000)
	if got, want := c.At(500), time.Unix(0, 1_500); !got.Equal(want) {
		t.Errorf("pinned At = %v, want %v", got, want)
	}
}

// TestStamped: stamps convert like At's; a stamp up to Resample after
// the last sample is converted with it (no clock read: a planted offset
// shows), an earlier one too, and a later one takes a new sample.
func TestStamped(t *testing.T) {
	var c Clock
	if _, ok := c.Stamped(0); ok {
		t.Error("a zero stamp converted")
	}
	boot, ok := Now()
	if !ok {
		t.Fatal("CLOCK_BOOTTIME unreadable")
	}
	got, ok := c.Stamped(uint64(boot - int64(3*time.Second)))
	if d := time.Until(got.Add(3 * time.Second)); !ok || d < -500*time.Millisecond || d > 500*time.Millisecond {
		t.Fatalf("a stamp of 3 s ago: %v (%v), want 3 s before now", got, ok)
	}
	sb := c.sampledBoot.Load()
	if sb < boot {
		t.Fatalf("sampled at boot ns %d, before the stamp's now %d", sb, boot)
	}
	const fake = 12345
	c.offset.Store(fake)
	for _, tt := range []struct {
		name  string
		stamp int64
	}{
		{"within Resample", sb + int64(Resample) - int64(time.Second)},
		{"before the sample", sb - int64(time.Hour)},
	} {
		if got, ok := c.Stamped(uint64(tt.stamp)); !ok || got.UnixNano() != fake+tt.stamp {
			t.Errorf("%s: %v (%v), want the planted offset's %v", tt.name, got, ok, time.Unix(0, fake+tt.stamp))
		}
	}
	late := sb + int64(Resample) + int64(time.Second)
	got, ok = c.Stamped(uint64(late))
	if !ok || got.UnixNano() == fake+late || c.offset.Load() == fake {
		t.Errorf("past Resample: %v (%v), offset %d: want a new sample", got, ok, c.offset.Load())
	}
	if real := c.Offset(time.Now()); real == fake {
		t.Errorf("Offset still the planted one after Stamped sampled")
	}
}

// TestStampedPinned: a pinned clock converts every stamp with its offset.
func TestStampedPinned(t *testing.T) {
	var c Clock
	c.Pin(1_000)
	if got, ok := c.Stamped(1 << 62); !ok || got.UnixNano() != 1_000+1<<62 {
		t.Errorf("pinned Stamped = %v (%v), want the pinned offset", got, ok)
	}
}
