package proccon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// A stop must not wait for the next kernel message. The source here reads
// a real connector socket that never joined the group, so no message can
// ever arrive: Read blocks in the poller, and only Close can end it. The
// same holds while Read naps between busy receives.
func TestIntegrationCloseWithoutAnyMessage(t *testing.T) {
	testenv.RequireRoot(t)
	for _, napping := range []bool{false, true} {
		t.Run(fmt.Sprintf("napping=%v", napping), func(t *testing.T) {
			c, err := netlink.Dial(unix.NETLINK_CONNECTOR, nil)
			if err != nil {
				testenv.Skip(t, "netlink connector: %v", err)
			}
			s := newSource(c, testBoot, tableProber{}, 0)
			if err := s.detach(); err != nil {
				t.Fatalf("detach: %v", err)
			}
			s.busy = napping
			errc := make(chan error, 1)
			go func() {
				var ev events.Event
				errc <- s.Read(&ev)
			}()
			// Give Read time to block (not a synchronisation: Close must
			// work whenever it comes).
			select {
			case err := <-errc:
				t.Fatalf("Read returned before Close: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, events.ErrClosed) {
					t.Errorf("Read after Close = %v, want ErrClosed", err)
				}
				t.Logf("Read returned %v after Close", time.Since(start))
			case <-time.After(10 * time.Second):
				t.Fatal("Read still blocked 10 s after Close")
			}
		})
	}
}

// Three listeners watch one fork storm while another process keeps a core
// busy: each must deliver the fork and the exit of every storm child, or
// report a loss that covers what it missed. The third has a receive buffer
// of a few messages and starts reading only once the storm is over, so it
// overflows however slowly the host forks, and must report what it misses
// (its loss path runs on the real kernel, not only in replays). Deadlines
// are generous and nothing is timed.
func TestIntegrationStormThreeListeners(t *testing.T) {
	const listeners, workers, perWorker = 3, 2, 3000
	srcs := make([]*Source, listeners)
	for i := range srcs {
		srcs[i], _ = openSource(t)
	}
	if err := srcs[2].k.setReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, "sh", "-c", "while :; do :; done") // the busy core
	type tally struct {
		forks, exits, lost int
		children           map[int32]int
	}
	tallies := make([]tally, listeners)
	var wpids sync.Map   // worker pid -> true, set before the storm starts
	var markers sync.Map // pids of the test's children started after the storm
	self := int32(os.Getpid())
	var wg sync.WaitGroup
	gate := make(chan struct{})
	stormOver := make(chan struct{})
	for i, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			if i == 2 {
				<-stormOver
			}
			tl := tally{children: map[int32]int{}}
			var ev events.Event
			// Until the exit of a marker, started after the storm
			// ended: every storm message was queued before it.
			for {
				if err := s.Read(&ev); err != nil {
					t.Errorf("listener %d: Read: %v", i, err)
					break
				}
				switch ev.Kind {
				case events.Lost:
					tl.lost += int(max(ev.Count, 1))
				case events.Fork:
					if _, ok := wpids.Load(ev.PPid); ok {
						tl.forks++
						tl.children[ev.Pid]++
					}
				case events.Exit:
					// A storm child's exit names its worker as
					// parent unless the worker reaped it before
					// the kernel sent it (then 0); it counts also
					// when its fork was not read.
					_, byWorker := wpids.Load(ev.PPid)
					if _, ok := markers.Load(ev.Pid); ok && ev.PPid == self {
						tallies[i] = tl
						return
					} else if tl.children[ev.Pid] > 0 || byWorker {
						tl.children[ev.Pid]--
						tl.exits++
					}
				}
			}
		}()
	}
	// Each worker is a shell whose subshells fork without exec: a storm
	// without a compiler.
	script := "i=0; read go; while [ $i -lt " + strconv.Itoa(perWorker) + " ]; do (exit 0) & wait $!; i=$((i+1)); done"
	var ws []*exec.Cmd
	var starts []func()
	for range workers {
		cmd := exec.Command("sh", "-c", script)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wpids.Store(int32(cmd.Process.Pid), true)
		ws = append(ws, cmd)
		starts = append(starts, func() { in.Write([]byte("go\n")); in.Close() })
	}
	close(gate)
	for _, f := range starts {
		f()
	}
	for _, cmd := range ws {
		if err := cmd.Wait(); err != nil {
			close(stormOver)
			t.Fatalf("storm worker: %v", err)
		}
	}
	close(stormOver)
	listened := make(chan struct{})
	go func() { wg.Wait(); close(listened) }()
	// A marker's exit can itself be lost by the small buffer: start one
	// every 100 ms until every listener saw one.
	for waiting := true; waiting; {
		m := exec.Command("/bin/true")
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		markers.Store(int32(m.Process.Pid), true)
		m.Wait()
		select {
		case <-listened:
			waiting = false
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i, tl := range tallies {
		want := workers * perWorker
		missing := 2*want - tl.forks - tl.exits
		t.Logf("listener %d: %d forks, %d exits of %d children, %d lost", i, tl.forks, tl.exits, want, tl.lost)
		if i == 2 && tl.lost == 0 {
			t.Errorf("listener 2 (a buffer of a few messages) reported no loss: its loss path did not run")
		}
		if missing > tl.lost {
			var left []string
			for pid, n := range tl.children {
				if n > 0 && len(left) < 10 {
					left = append(left, strconv.Itoa(int(pid)))
				}
			}
			t.Errorf("listener %d: %d storm events missing, %d reported lost (children without exit: %s)",
				i, missing, tl.lost, strings.Join(left, " "))
		}
	}
}
