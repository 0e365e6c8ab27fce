package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as testing's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn with a fatalRecorder on its own goroutine and returns the
// message it failed with, or "" when it returned.
func fatalOf(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestPoll(t *testing.T) {
	calls := 0
	if !Poll(10*time.Second, func() bool { calls++; return calls == 5 }) {
		t.Fatal("Poll = false for a condition that holds at the fifth call")
	}
	if calls != 5 {
		t.Errorf("Poll called cond %d times, want 5 (it stops once cond holds)", calls)
	}

	calls = 0
	start := time.Now()
	if Poll(100*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("Poll = true for a condition that never holds")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("Poll gave up after %v, before its 100ms timeout", d)
	}
	// Checked again at the deadline at least: how often before it is up
	// to the scheduler of a loaded host.
	if calls < 2 {
		t.Errorf("Poll called cond %d times in 100ms, want it checked again before giving up", calls)
	}
}

func TestEventually(t *testing.T) {
	if msg := fatalOf(t, func(tb testing.TB) {
		n := 0
		Eventually(tb, 10*time.Second, func() bool { n++; return n > 2 }, "never")
	}); msg != "" {
		t.Errorf("Eventually(cond that comes true) failed: %q", msg)
	}
	msg := fatalOf(t, func(tb testing.TB) {
		Eventually(tb, 20*time.Millisecond, func() bool { return false }, "child %d never %s", 42, "exited")
	})
	if want := "child 42 never exited (waited 20ms)"; msg != want {
		t.Errorf("Eventually(cond never true) failed with %q, want %q", msg, want)
	}
	msg = fatalOf(t, func(tb testing.TB) {
		n := 0
		EventuallyNil(tb, 20*time.Millisecond, func() error { n++; return fmt.Errorf("attempt %d", n) }, "daemon %s not serving", "d1")
	})
	if !strings.HasPrefix(msg, "daemon d1 not serving (waited 20ms): attempt ") || strings.HasSuffix(msg, "attempt 1") {
		t.Errorf("EventuallyNil(always failing) failed with %q, want the message, the timeout and the last error", msg)
	}
	if msg := fatalOf(t, func(tb testing.TB) {
		EventuallyNil(tb, 10*time.Second, func() error { return nil }, "never")
	}); msg != "" {
		t.Errorf("EventuallyNil(nil at once) failed: %q", msg)
	}
}
