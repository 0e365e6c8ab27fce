package tracker

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/procctx"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationPollerYoungNotDescribed: the /proc poller's tokens are
// start ticks without the pidfs inode. A process that started in the
// tick its snapshot began (or later) could exit and leave its pid, within
// that tick, to another that the token cannot tell from it before the
// tracker reads /proc: its inferred fork gets no context. One that started
// before the snapshot began is described. (A reissue within one tick at
// the moment of a poll cannot be made on demand; the test checks the rule
// on a real poller, real processes and real /proc.)
func TestIntegrationPollerYoungNotDescribed(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := fallback.NewPoller(ctx, fallback.NewProc("/proc"), fallback.PollerOptions{Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr := &Tracker{ctxr: procctx.New("/proc", 0), opts: Options{ExecContext: func() bool { return true }}}
	tr.setSource(p)
	// next starts sleep and returns its inferred fork, filled as the
	// drain fills it, with the tick its snapshot began.
	next := func(settle bool) (events.Event, uint64, uint64) {
		c := testenv.Start(t, "/bin/sleep", "100")
		pid := int32(c.Process.Pid)
		var st procfs.Stat
		if err := procfs.NewReader("/proc").ReadStat(pid, &st); err != nil {
			t.Fatal(err)
		}
		if settle {
			// Two ticks on: the next snapshot begins after its start.
			testenv.Eventually(t, 10*time.Second, func() bool {
				var ts unix.Timespec
				unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
				return uint64(ts.Nano())/10_000_000 > st.StartTime+1
			}, "the clock never moved")
		}
		var ev events.Event
		for {
			if err := p.Read(&ev); err != nil {
				t.Fatal(err)
			}
			if ev.Kind == events.Fork && ev.Pid == pid {
				tr.context(&ev)
				return ev, st.StartTime, p.SnapshotTick()
			}
		}
	}
	ev, start, tick := next(true)
	if start >= tick {
		t.Fatalf("settled process started at tick %d, its snapshot began at %d", start, tick)
	}
	if !ev.Ctx.Valid || len(ev.Argv) != 2 {
		t.Errorf("a process started before its snapshot: context valid %v argv %q, want it described", ev.Ctx.Valid, ev.Argv)
	}
	for attempt := 0; attempt < 20; attempt++ {
		ev, start, tick := next(false)
		if start < tick {
			t.Logf("attempt %d: started at tick %d, before the snapshot's %d: again", attempt, start, tick)
			continue
		}
		if ev.Ctx.Valid || ev.Argv != nil || ev.Exe != "" {
			t.Errorf("a process started in its snapshot's tick %d: described (argv %q exe %q), want nothing", tick, ev.Argv, ev.Exe)
		}
		return
	}
	t.Fatal("20 attempts: never a process started in its snapshot's tick")
}
