//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// pipeRing stands for the ring buffer in readyWaiter tests: a pipe is
// readable when written to, as the ring is when a program wakes it.
type pipeRing struct {
	r, w  int
	tries int
	err   error
	try   func(uintptr) bool
}

func newPipeRing(t *testing.T) *pipeRing {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	p := &pipeRing{r: fds[0], w: fds[1]}
	p.try = p.read
	t.Cleanup(func() { unix.Close(p.r); unix.Close(p.w) })
	return p
}

// read is the try function: a byte read is a record, an empty pipe a
// drained ring.
func (p *pipeRing) read(uintptr) bool {
	p.tries++
	var b [1]byte
	_, err := unix.Read(p.r, b[:])
	if errors.Is(err, unix.EAGAIN) {
		return false
	}
	p.err = err
	return true
}

func (p *pipeRing) put(t *testing.T) {
	if _, err := unix.Write(p.w, []byte{1}); err != nil {
		t.Error(err)
	}
}

// TestReadyWaiter runs one waiter through a sequence of waits: its
// timerfd deadline must fire when nothing comes (a test that would hang
// on a timer never armed fails at the limit), never before the deadline,
// never when a record is ready or arrives first, and an expiry must not
// outlive its deadline into the next wait.
func TestReadyWaiter(t *testing.T) {
	p := newPipeRing(t)
	w, err := newReadyWaiter(p.r)
	if err != nil {
		t.Fatal(err)
	}
	defer w.closeAll()
	const none, past, far = 0, -time.Millisecond, time.Hour
	steps := []struct {
		name     string
		deadline time.Duration // from now; none: no deadline
		keep     bool          // the previous step's deadline instead
		before   bool          // a record is ready before the wait
		during   bool          // a record is written while it waits
		want     error
	}{
		{"deadline fires", 20 * time.Millisecond, false, false, false, os.ErrDeadlineExceeded},
		{"record ready, deadline passed", past, false, true, false, nil},
		{"no deadline after an expiry", none, false, false, true, nil},
		{"record before a far deadline", far, false, false, true, nil},
		{"shorter deadline fires", 10 * time.Millisecond, false, false, false, os.ErrDeadlineExceeded},
		{"record ready, same deadline passed", none, true, true, false, nil},
		{"same deadline passed", none, true, false, false, os.ErrDeadlineExceeded},
		{"record ready, no deadline", none, false, true, false, nil},
		{"deadline fires again", 5 * time.Millisecond, false, false, false, os.ErrDeadlineExceeded},
	}
	var deadline time.Time
	for _, st := range steps {
		switch {
		case st.keep:
		case st.deadline == none:
			deadline = time.Time{}
		default:
			deadline = time.Now().Add(st.deadline)
		}
		if st.before {
			p.put(t)
		}
		if st.during {
			go func() {
				time.Sleep(20 * time.Millisecond)
				p.put(t)
			}()
		}
		p.tries, p.err = 0, nil
		done := make(chan error, 1)
		go func() { done <- w.wait(deadline, p.try, &p.err) }()
		var got error
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			w.close()
			<-done
			t.Fatalf("%s: wait never returned (deadline %v from the start)", st.name, st.deadline)
		}
		returned := time.Now()
		if got != st.want {
			t.Fatalf("%s: wait() = %v, want %v", st.name, got, st.want)
		}
		if got != nil && returned.Before(deadline) {
			t.Fatalf("%s: deadline fired %v early", st.name, deadline.Sub(returned))
		}
		// The waiter must sleep until the timer or the pipe wakes it, not
		// spin on the clock.
		if p.tries > 10 {
			t.Fatalf("%s: %d tries in one wait", st.name, p.tries)
		}
	}
}

// TestReadyWaiterClose checks that closing the waiter wakes a wait
// without deadline, which then fails.
func TestReadyWaiterClose(t *testing.T) {
	p := newPipeRing(t)
	w, err := newReadyWaiter(p.r)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.wait(time.Time{}, p.try, &p.err) }()
	time.Sleep(10 * time.Millisecond)
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("wait() after close = nil, want the closed file's error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not wake the wait")
	}
	if err := w.release(); err != nil {
		t.Error(err)
	}
}

// TestReadyWaiterNoAlloc checks that a wait allocates nothing: when it
// arms the timer, reads a record or finds the deadline passed.
func TestReadyWaiterNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newPipeRing(t)
	w, err := newReadyWaiter(p.r)
	if err != nil {
		t.Fatal(err)
	}
	defer w.closeAll()
	tests := []struct {
		name string
		wait func() error
		want error
	}{
		{"record, new deadline", func() error {
			p.put(t)
			return w.wait(time.Now().Add(time.Hour), p.try, &p.err)
		}, nil},
		{"deadline passed", func() error {
			return w.wait(time.Now().Add(-time.Millisecond), p.try, &p.err)
		}, os.ErrDeadlineExceeded},
	}
	for _, tt := range tests {
		if err := tt.wait(); err != tt.want {
			t.Fatalf("%s: wait() = %v, want %v", tt.name, err, tt.want)
		}
		if a := testing.AllocsPerRun(100, func() { _ = tt.wait() }); a != 0 {
			t.Errorf("%s: wait() allocates %v times", tt.name, a)
		}
	}
}

// TestReadyWaiterKick: a record the ring holds without having woken the
// reader (a program submits most without a wake-up) is found at the
// deadline, or at once when kicked; a kick with nothing to read leaves the
// wait waiting, and kicks before a wait, or many at once, make it look
// once more, not forever.
func TestReadyWaiterKick(t *testing.T) {
	p := newPipeRing(t) // never written: the ring never wakes the reader
	w, err := newReadyWaiter(p.r)
	if err != nil {
		t.Fatal(err)
	}
	defer w.closeAll()
	var silent atomic.Bool // a record is in the ring
	var tries atomic.Int32
	var res error
	try := func(uintptr) bool {
		tries.Add(1)
		if silent.Swap(false) {
			res = nil // read
			return true
		}
		return false
	}
	start := func(deadline time.Time) chan error {
		done := make(chan error, 1)
		go func() { done <- w.wait(deadline, try, &res) }()
		return done
	}
	waitFor := func(name string, done chan error, want error) {
		t.Helper()
		select {
		case got := <-done:
			if got != want {
				t.Fatalf("%s: wait() = %v, want %v", name, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: wait never returned", name)
		}
	}
	settle := func(n int32) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, func() bool { return tries.Load() >= n }, "the waiter never tried %d times", n)
	}

	// A silent record, no deadline: found only when kicked.
	tries.Store(0)
	done := start(time.Time{})
	settle(1)
	silent.Store(true)
	select {
	case err := <-done:
		t.Fatalf("wait returned %v for a record that woke nobody, before a kick", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.kick()
	waitFor("kicked", done, nil)

	// A kick with nothing in the ring: the wait goes on until its deadline.
	tries.Store(0)
	deadline := time.Now().Add(100 * time.Millisecond)
	done = start(deadline)
	settle(1)
	w.kick()
	settle(2)
	waitFor("kicked, nothing to read", done, os.ErrDeadlineExceeded)

	// Kicks before the wait, many of them: one look more, then waiting.
	tries.Store(0)
	for range 5 {
		w.kick()
	}
	done = start(time.Now().Add(100 * time.Millisecond))
	waitFor("kicked before", done, os.ErrDeadlineExceeded)
	if n := tries.Load(); n > 4 {
		t.Errorf("kicks before a wait made it try %d times, want a few", n)
	}
	// And a later kick still wakes a wait.
	tries.Store(0)
	done = start(time.Time{})
	settle(1)
	silent.Store(true)
	w.kick()
	waitFor("kicked after earlier kicks", done, nil)
}
