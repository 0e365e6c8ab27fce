package testenv

import (
	"testing"
	"time"
)

// The first check of a condition is immediate; the pause between checks
// then doubles from firstTick up to maxTick, so a condition that holds
// within a millisecond costs about one, and a slow one is not polled hot.
const (
	firstTick = time.Millisecond
	maxTick   = 50 * time.Millisecond
)

// Poll calls cond until it returns true or timeout has passed, and reports
// whether it did. cond is called once more at the deadline, so a wait that
// overran (a stopped machine) still sees the final state. The timeout
// bounds the wait; it is not an assertion about speed.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for tick := firstTick; time.Now().Before(deadline); tick = min(2*tick, maxTick) {
		if cond() {
			return true
		}
		time.Sleep(min(tick, time.Until(deadline)))
	}
	return cond()
}

// Eventually waits, as Poll does, for cond to hold, and fails the test
// (t.Fatalf, so only from the test's goroutine) with the message and the
// timeout when it never does.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf(format+" (waited %v)", append(args, timeout)...)
	}
}

// EventuallyNil waits, as Poll does, for f to return nil, and fails the test
// with the message, the timeout and f's last error when it never does.
func EventuallyNil(t testing.TB, timeout time.Duration, f func() error, format string, args ...any) {
	t.Helper()
	var err error
	if !Poll(timeout, func() bool { err = f(); return err == nil }) {
		t.Fatalf(format+" (waited %v): %v", append(args, timeout, err)...)
	}
}
