package daemon

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationDeadlineStaysMonotonic: a pass that finds a grant with a
// wall-clock limit still running indexes it again from the store, whose
// copy has the wall time only. The deadline the daemon keeps must still
// be on the monotonic clock: it was replaced by the wall-only copy, and a
// clock stepped forward an hour then tore down a 30-minute grant 11 s
// after its launch.
func TestIntegrationDeadlineStaysMonotonic(t *testing.T) {
	h := newHarness(t)
	cl, err := h.d.Launch(context.Background(), api.Peer{Pid: int32(os.Getpid())},
		&api.LaunchRequest{Argv: []string{"sleep", "60"}, WallClock: api.Duration(30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(int(cl.Pid), syscall.SIGKILL) })
	for _, tr := range []Trigger{Pass, Startup} {
		if _, _, err := h.d.settle(context.Background(), cl.ID, request{trigger: tr}); err != nil {
			t.Fatalf("%v: %v", tr, err)
		}
		h.d.mu.RLock()
		due, ok := h.d.deadline[cl.ID]
		h.d.mu.RUnlock()
		if !ok {
			t.Fatalf("after a %v the grant has no deadline", tr)
		}
		// time.Time's String shows the monotonic reading as "m=".
		if !strings.Contains(due.String(), " m=") {
			t.Errorf("after a %v the deadline %v is on the wall clock only: a clock step moves it", tr, due)
		}
		if left := time.Until(due); left < 29*time.Minute || left > 30*time.Minute {
			t.Errorf("after a %v the deadline is in %v, want about 30m", tr, left)
		}
	}
}

// TestResumedGraceBounded: a teardown a stopped daemon began resumes with
// what remains of its grace, never more than the whole grace: a clock
// stepped back an hour made a 20 s grace resumed at restart last an hour
// and 20 s.
func TestResumedGraceBounded(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	d := &Daemon{cfg: DefaultConfig(), now: func() time.Time { return now }}
	for _, tc := range []struct {
		name  string
		until time.Time
		grace time.Duration
		want  time.Duration
	}{
		{"what remains", now.Add(5 * time.Second), 20 * time.Second, 5 * time.Second},
		{"clock stepped back an hour", now.Add(time.Hour + 20*time.Second), 20 * time.Second, 20 * time.Second},
		{"past", now.Add(-time.Minute), 20 * time.Second, time.Millisecond},
		{"a record without its grace", now.Add(3 * time.Hour), 0, api.MaxGrace},
		{"a record without its grace, in time", now.Add(10 * time.Second), 0, 10 * time.Second},
	} {
		c := store.Claim{State: store.Releasing, GraceUntil: tc.until, Grace: tc.grace}
		if got := d.graceFor(&c, request{trigger: Startup}); got != tc.want {
			t.Errorf("%s: resumed grace %v, want %v", tc.name, got, tc.want)
		}
	}
	c := store.Claim{State: store.Releasing, GraceUntil: now.Add(time.Hour), Grace: time.Hour}
	if got := d.graceFor(&c, request{trigger: ReleaseAsked, grace: 2 * time.Second}); got != 2*time.Second {
		t.Errorf("a release asking for 2s resumed with %v", got)
	}
}

// TestIntegrationExitCodeSurvivesFailedWrite: a job whose exit was reaped
// while the store could not be written keeps its exit code for the pass
// that writes it: it ended as "exited while not watched; exit code
// unknown".
func TestIntegrationExitCodeSurvivesFailedWrite(t *testing.T) {
	h := newHarness(t)
	cl, err := h.d.Launch(context.Background(), api.Peer{Pid: int32(os.Getpid())},
		&api.LaunchRequest{Argv: []string{"sleep", "60"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	h.st.fail.Store(true)
	syscall.Kill(int(cl.Pid), syscall.SIGKILL)
	testenv.Eventually(t, 10*time.Second, func() bool { return zombieOrGone(cl.Pid) }, "the job's root did not exit")
	h.d.waitChildren()
	if c, err := h.st.Get(cl.ID); err != nil || c.State != store.Running {
		t.Fatalf("with the store failing the job is %v (%v), want still running", c.State, err)
	}
	h.st.fail.Store(false)
	if _, _, err := h.d.settle(context.Background(), cl.ID, request{trigger: Pass}); err != nil {
		t.Fatal(err)
	}
	c, err := h.st.Get(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != store.Exited || c.ExitSignal != int(syscall.SIGKILL) || c.RetiredReason != "" {
		t.Fatalf("job %s: state %s, signal %d, reason %q; want exited by SIGKILL", c.ID, c.State, c.ExitSignal, c.RetiredReason)
	}
}
