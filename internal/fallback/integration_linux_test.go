package fallback

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// snapshotters returns the real Linux mechanisms: /proc and the host's ps.
func snapshotters(t testing.TB) map[string]Snapshotter {
	m := map[string]Snapshotter{"proc": NewProc("/proc")}
	if _, err := os.Stat(NewPS(PSOptions{}).opts.Path); err != nil {
		testenv.Skip(t, "no ps binary: %v", err)
	}
	m["ps"] = NewPS(PSOptions{})
	return m
}

func startSleep(t testing.TB) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "600")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

func TestIntegrationChildSeen(t *testing.T) {
	want := map[string]token.Precision{"proc": token.Ticks, "ps": token.Second}
	for name, s := range snapshotters(t) {
		t.Run(name, func(t *testing.T) {
			child := startSleep(t)
			snap, err := s.Snapshot(context.Background())
			if err != nil {
				t.Fatalf("Snapshot() error: %v", err)
			}
			e := snap.Lookup(int32(child.Process.Pid))
			if e == nil {
				t.Fatalf("child %d not in the snapshot", child.Process.Pid)
			}
			if e.PPid != int32(os.Getpid()) || e.Token.Prec != want[name] || e.Token.Ino != 0 || e.CommString() != "sleep" {
				t.Errorf("child entry: ppid %d token %v comm %q; want ppid %d, %s precision, comm sleep",
					e.PPid, e.Token, e.CommString(), os.Getpid(), want[name])
			}
			if snap.BootTime == 0 {
				t.Error("snapshot without boot time")
			}
			// A claim made just now is inside the start granule plus
			// tolerance: not provable by polling.
			if r, why := Judge(Claim{e.Pid, e.Token, time.Now()}, snap, nil); r != verdict.Unverifiable {
				t.Errorf("Judge(fresh child) = %v (%s), want UNVERIFIABLE", r, why)
			}
		})
	}
}

// readUntil reads events until match returns true; it gives up (fails)
// after a minute so a broken poller does not hang the test binary.
func readUntil(t *testing.T, p *Poller, match func(*events.Event) bool) events.Event {
	t.Helper()
	stop := time.AfterFunc(time.Minute, func() { p.Close() })
	defer stop.Stop()
	var ev events.Event
	for {
		if err := p.Read(&ev); err != nil {
			t.Fatalf("Read: %v", err)
		}
		if ev.Kind == events.Lost {
			t.Logf("poll failed (gap) on %s", ev.Mechanism)
		}
		if match(&ev) {
			return ev
		}
	}
}

func TestIntegrationInferredForkExit(t *testing.T) {
	for name, s := range snapshotters(t) {
		t.Run(name, func(t *testing.T) {
			p, err := NewPoller(context.Background(), s, PollerOptions{Interval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			child := startSleep(t)
			pid := int32(child.Process.Pid)
			fork := readUntil(t, p, func(ev *events.Event) bool { return ev.Kind == events.Fork && ev.Pid == pid })
			if !fork.Inferred || fork.Mechanism != s.Mechanism() || fork.PPid != int32(os.Getpid()) || fork.ParentToken.IsZero() {
				t.Errorf("fork event %+v: want inferred, from %s, ppid %d with its token", fork, s.Mechanism(), os.Getpid())
			}
			child.Process.Kill()
			child.Wait()
			exit := readUntil(t, p, func(ev *events.Event) bool { return ev.Kind == events.Exit && ev.Pid == pid })
			if !exit.Inferred || exit.Token != fork.Token || exit.Status != StatusUnknown {
				t.Errorf("exit event %+v: want inferred, token %v, unknown status", exit, fork.Token)
			}
			if r, why := Judge(Claim{pid, fork.Token, time.Now()}, p.latest(), p.Continuity()); r != verdict.Gone && r != verdict.Foreign {
				t.Errorf("Judge(exited child) = %v (%s), want GONE (or FOREIGN if the pid was reissued)", r, why)
			}
		})
	}
}

// A long-lived process claimed after its start granule closed, and watched
// without a gap since, is OWNED by continuity even with coarse tokens.
func TestIntegrationContinuityOwned(t *testing.T) {
	for name, s := range snapshotters(t) {
		t.Run(name, func(t *testing.T) {
			p, err := NewPoller(context.Background(), s, PollerOptions{Interval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			init1 := p.latest().Lookup(1)
			claim := Claim{Pid: 1, Token: init1.Token, Since: time.Now()}
			// Let at least one poll happen after the claim: start a child
			// so that the poll yields an event.
			child := startSleep(t)
			readUntil(t, p, func(ev *events.Event) bool { return ev.Kind == events.Fork && ev.Pid == int32(child.Process.Pid) })
			if r, why := Judge(claim, p.latest(), p.Continuity()); r != verdict.Owned {
				t.Errorf("Judge(pid 1, watched since the claim) = %v (%s), want OWNED", r, why)
			}
			if r, why := Judge(claim, p.latest(), nil); r != verdict.Unverifiable {
				t.Errorf("Judge(pid 1, no continuity) = %v (%s), want UNVERIFIABLE", r, why)
			}
		})
	}
}

// reissue kills and reaps child, then gives its pid to a stranger.
func reissue(t *testing.T, child *exec.Cmd) *testenv.Spawned {
	t.Helper()
	child.Process.Kill()
	child.Wait()
	s, err := testenv.Reissue(t, int32(child.Process.Pid))
	if err != nil {
		t.Fatalf("Reissue(%d) = %v", child.Process.Pid, err)
	}
	return s
}

// waitSecondStart sleeps until just after a second boundary, so that a
// reissue a few milliseconds later falls in the same second.
func waitSecondStart() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 5*time.Millisecond).Sub(now))
}

// A pid reissued within the same second: the ps token cannot tell, so the
// claim is UNVERIFIABLE, never OWNED; /proc ticks tell it apart (FOREIGN),
// and a ticks claim judged against ps is not OWNED.
func TestIntegrationSameSecondReissue(t *testing.T) {
	testenv.RequireRoot(t)
	ps, proc := NewPS(PSOptions{}), NewProc("/proc")
	// Each attempt needs two ps runs inside one second; a loaded machine
	// may need several.
	for attempt := 0; attempt < 20; attempt++ {
		waitSecondStart()
		child := startSleep(t)
		pid := int32(child.Process.Pid)
		before, err := proc.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tickClaim := Claim{pid, before.Lookup(pid).Token, time.Now()}
		beforePS, err := ps.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		secClaim := Claim{pid, beforePS.Lookup(pid).Token, time.Now()}

		stranger := reissue(t, child)
		afterPS, err := ps.Snapshot(context.Background())
		if err != nil {
			stranger.Stop()
			t.Fatal(err)
		}
		after, err := proc.Snapshot(context.Background())
		if err != nil {
			stranger.Stop()
			t.Fatal(err)
		}
		newSec, newTick := afterPS.Lookup(pid), after.Lookup(pid)
		if newSec == nil || newTick == nil {
			stranger.Stop()
			t.Fatalf("reissued pid %d not in the tables", pid)
		}
		if newSec.Token != secClaim.Token || newTick.Token == tickClaim.Token {
			stranger.Stop()
			t.Logf("attempt %d: the reissue crossed a second boundary (or shared a tick); again", attempt)
			continue
		}
		// A continuity tracker that saw the pid in both ps snapshots does
		// not change the answer.
		cont := NewContinuity(beforePS.Taken.Add(-time.Second), time.Minute)
		cont.Observe(beforePS)
		cont.Observe(afterPS)
		tests := []struct {
			name  string
			claim Claim
			snap  *Snapshot
			cont  *Continuity
			want  verdict.Result
		}{
			{"seconds claim, ps", secClaim, afterPS, cont, verdict.Unverifiable},
			{"ticks claim, proc", tickClaim, after, nil, verdict.Foreign},
			{"ticks claim, ps", tickClaim, afterPS, cont, verdict.Unverifiable},
		}
		for _, tt := range tests {
			if r, why := Judge(tt.claim, tt.snap, tt.cont); r != tt.want {
				t.Errorf("%s: Judge(%v) after a same-second reissue = %v (%s), want %v", tt.name, tt.claim.Token, r, why, tt.want)
			}
		}
		stranger.Stop()
		return
	}
	t.Fatal("could not reissue a pid within the same second in 20 attempts")
}

// A reissued pid whose ticks differ is FOREIGN from /proc; from ps the
// ticks claim is not OWNED (FOREIGN once seconds apart, else UNVERIFIABLE).
func TestIntegrationReissueLater(t *testing.T) {
	testenv.RequireRoot(t)
	child := startSleep(t)
	pid := int32(child.Process.Pid)
	snap, err := NewProc("/proc").Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	claim := Claim{pid, snap.Lookup(pid).Token, time.Now()}
	time.Sleep(3 * time.Second) // the reissue must start more than CrossTolerance later
	reissue(t, child)           // the stranger is stopped at cleanup
	for name, s := range snapshotters(t) {
		after, err := s.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r, why := Judge(claim, after, nil); r != verdict.Foreign {
			t.Errorf("%s: Judge(ticks claim, pid reissued 3 s later) = %v (%s), want FOREIGN", name, r, why)
		}
	}
}

func TestIntegrationProcBroken(t *testing.T) {
	s, err := NewProc(filepath.Join(t.TempDir(), "no-proc")).Snapshot(context.Background())
	if s != nil || !errors.Is(err, ErrScanFailed) {
		t.Errorf("Snapshot(missing /proc) = %v, %v; want nil, ErrScanFailed", s, err)
	}
}
