package actions

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

func newExitWaiter(t *testing.T) *ExitWaiter {
	t.Helper()
	w, err := NewExitWaiter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// pidfdsOf opens n pidfds of one live process.
func pidfdsOf(t *testing.T, pid int32, n int) []unix.PollFd {
	t.Helper()
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	fds := make([]unix.PollFd, n)
	for i := range fds {
		h, err := pidfd.Open(pid, boot)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		fds[i] = unix.PollFd{Fd: int32(h.Fd()), Events: unix.POLLIN}
	}
	return fds
}

// TestExitWaiter: a wait ends when a process exits (long before its
// minute), when its time passes, or when its context ends; after Close a
// wait polls on its own and still sees an exit.
func TestExitWaiter(t *testing.T) {
	testenv.RequireRoot(t)
	w := newExitWaiter(t)
	cmd, _ := testenv.Shell(t, "exec sleep 60", 0)
	fds := pidfdsOf(t, int32(cmd.Process.Pid), 2)
	if w.Wait(context.Background(), fds, 50*time.Millisecond) {
		t.Fatal("woken for a process that runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.Wait(ctx, fds, time.Minute) {
		t.Fatal("woken, with the context ended, for a process that runs")
	}
	go func() { time.Sleep(100 * time.Millisecond); cmd.Process.Kill() }()
	if !w.Wait(context.Background(), fds[1:], time.Minute) {
		t.Fatal("not woken by the process's exit")
	}
	if n := w.Waits(); n != 0 {
		t.Errorf("%d waits in progress after all ended", n)
	}
	w.mu.Lock()
	left := len(w.waiting)
	w.mu.Unlock()
	if left != 0 {
		t.Errorf("%d registrations left after all waits ended", left)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !w.Wait(context.Background(), fds, time.Minute) {
		t.Fatal("after Close, not woken by an exited process")
	}
}

// TestExitWaiterThreads: many waits at once take no thread each. 300
// teardowns waiting in poll(2) held 300 threads (and 10,000 end the
// process); in the waiter they hold a handful. The same waits through a
// nil waiter (each polls in its own thread) show what the count measures.
func TestExitWaiterThreads(t *testing.T) {
	testenv.RequireRoot(t)
	cmd, _ := testenv.Shell(t, "exec sleep 60", 0)
	const waits = 300
	fds := pidfdsOf(t, int32(cmd.Process.Pid), waits)
	for _, tc := range []struct {
		name     string
		w        *ExitWaiter
		min, max int // threads added while the waits run
	}{
		{"exit waiter", newExitWaiter(t), 0, 20},
		{"poll in each thread", nil, waits / 2, waits + 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := threads(t)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := range waits {
				wg.Go(func() { tc.w.Wait(ctx, fds[i:i+1], 2*time.Second) })
			}
			// Wait for the waits to be in place (the waiter counts them;
			// poll(2)'s threads show in the count).
			var during int
			testenv.Poll(time.Second, func() bool {
				during = threads(t)
				return tc.w.Waits() == waits || tc.w == nil && during-before >= tc.min
			})
			cancel()
			wg.Wait()
			t.Logf("%d waits: %d -> %d threads", waits, before, during)
			lo := tc.min
			if tc.w == nil && before >= waits {
				lo = 0 // an earlier run's poll threads, kept idle by the runtime, serve these
			}
			if added := during - before; added < lo || added > tc.max {
				t.Errorf("%d waits added %d threads (%d -> %d), want %d to %d", waits, added, before, during, lo, tc.max)
			}
		})
	}
}

// threads counts this process's threads.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := procfs.LineValue(b, "Threads:")
	n, err := strconv.Atoi(string(v))
	if err != nil {
		t.Fatalf("Threads: %q: %v", v, err)
	}
	return n
}

// TestExitWaiterCloseRace: Close while a Wait ends by its timer, many
// times: the descriptors are released only once run has returned, so
// Close neither hangs nor wakes a descriptor number reused meanwhile
// (before, the last Wait freed them under run, which then never woke).
func TestExitWaiterCloseRace(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	fds := []unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}} // never readable
	for range 1000 {
		w, err := NewExitWaiter()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); w.Wait(context.Background(), fds, 50*time.Microsecond) }()
		// Close once the Wait is in progress, so that its timer may end
		// it while Close runs.
		for w.Waits() == 0 {
			select {
			case <-done:
			default:
				continue
			}
			break
		}
		closed := make(chan error, 1)
		go func() { closed <- w.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close hung: run was never woken")
		}
		<-done
		w.mu.Lock()
		freed := w.freed
		w.mu.Unlock()
		if !freed {
			t.Fatal("the descriptors were never released")
		}
	}
}
