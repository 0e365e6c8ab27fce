package proccon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationBarrier: a shell double-forks a sleeper and exits while
// nothing reads the socket; a barrier asked after that is reached only
// once Read has handed out the sleeper's fork (and been called again).
// The reader starts after the barrier, on its own goroutine, and passes
// each event on before it reads the next, as the tracker applies each
// before the next. A fresh source each round. No thread of the process
// keeps a marker name.
func TestIntegrationBarrier(t *testing.T) {
	for round := range 5 {
		s, _ := openSource(t)
		g := testenv.Orphan(t)
		mark, ok := s.Barrier()
		if !ok {
			t.Fatal("Barrier() not ok on a kernel socket")
		}
		forked := make(chan int32, 1<<16)
		go func() {
			var ev events.Event
			for s.Read(&ev) == nil {
				if ev.Kind == events.Fork {
					forked <- ev.Pid
				}
			}
		}()
		testenv.Eventually(t, 10*time.Second, func() bool { s.Kick(); return s.Reached(mark) },
			"round %d: barrier %d never reached", round, mark)
		seen := false
		for len(forked) > 0 && !seen {
			seen = <-forked == g
		}
		if !seen {
			t.Fatalf("round %d: barrier %d reached before the fork of sleeper %d was handed out", round, mark, g)
		}
		s.Close()
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/comm")
	for _, f := range tasks {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), markerPrefix) {
			t.Errorf("%s is %q: a marker name stayed", f, b)
		}
	}
}

// TestBarrierReplay: without a kernel socket there is no barrier.
func TestBarrierReplay(t *testing.T) {
	s := &Source{}
	if _, ok := s.Barrier(); ok {
		t.Error("Barrier() ok without a kernel socket")
	}
}

// TestIntegrationBarrierHeldExit: the exit of a process that predates the
// source is held a moment for its other threads' exits (addPending); a
// barrier met meanwhile hands it out first. Before, the barrier was
// reached while the exit was still held, and a request that synced saw
// the process alive in the graph.
func TestIntegrationBarrierHeldExit(t *testing.T) {
	for round := range 3 {
		sleeper := testenv.Start(t, "sleep", "100") // before the source: unknown to it
		s, _ := openSource(t)
		pid := int32(sleeper.Process.Pid)
		sleeper.Process.Kill()
		sleeper.Wait() // reaped: /proc says the group is dead
		mark, ok := s.Barrier()
		if !ok {
			t.Fatal("Barrier() not ok on a kernel socket")
		}
		exitAfter := make(chan bool, 1) // the barrier already reached when the exit came out
		go func() {
			var ev events.Event
			for s.Read(&ev) == nil {
				if ev.Kind == events.Exit && ev.Pid == pid {
					exitAfter <- s.Reached(mark)
				}
			}
		}()
		testenv.Eventually(t, 10*time.Second, func() bool { s.Kick(); return s.Reached(mark) },
			"round %d: barrier %d never reached", round, mark)
		select {
		case late := <-exitAfter:
			if late {
				t.Fatalf("round %d: barrier %d reached before the exit of %d was handed out", round, mark, pid)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the exit of %d was never handed out", round, pid)
		}
		s.Close()
	}
}
