package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationNoStall: a release of a TERM-ignoring grant with a long
// grace runs in a worker of the daemon's. The client that asked gives up
// after 2 s: the teardown goes on (no SIGKILL before the grace; the claim
// shows releasing). Meanwhile another grant's wall clock fires, and the
// daemon stops promptly on SIGTERM, leaving the release in progress, which
// the next start resumes with the grace that remains. Before, the release
// held the main loop for its whole grace, and the grace died with the
// client.
func TestIntegrationNoStall(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	ready := filepath.Join(t.TempDir(), "ready")
	stubborn := d.launch(t, "--", "sh", "-c", `trap "" TERM; touch `+ready+`; while :; do sleep 1; done`)
	testenv.Eventually(t, 10*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }, "the grant never set its trap")

	// The grace outlasts what follows up to the restart (the client's
	// 2 s, a wall clock's firing, a stop) on a slow host too: a grace
	// ending before the checks below would fail them for nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	g := api.Duration(24 * time.Second)
	res, err := d.client.Release(ctx, stubborn.ID, &api.ReleaseRequest{Grace: &g})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("release with a 24 s grace answered within 2 s: %+v %+v, %v", res.Claim, res.Outcome, err)
	}
	if got := d.claim(t, stubborn.ID); got.State != store.Releasing || got.GraceUntil.IsZero() {
		t.Errorf("after the client left: state %s, grace until %v; want releasing with its deadline", got.State, got.GraceUntil)
	}
	if !owned(stubborn.Pid, stubborn.Token) {
		t.Fatal("the TERM-ignoring root was killed when its client left, before its grace ended")
	}

	timed := d.launch(t, "--wall-clock", "2s", "--", "sleep", "1000")
	testenv.Eventually(t, 20*time.Second, func() bool { return !owned(timed.Pid, timed.Token) },
		"a 2 s wall clock did not fire while another claim was in its grace")

	d.term() // fails the test if the daemon does not stop
	if !owned(stubborn.Pid, stubborn.Token) {
		t.Fatal("the stopping daemon sent more to a teardown in progress")
	}
	d = startDaemon(t, state, sock)
	testenv.Eventually(t, 60*time.Second, func() bool {
		return !owned(stubborn.Pid, stubborn.Token) && d.claim(t, stubborn.ID).State == store.Released
	}, "the release left in progress was not resumed after the restart")
}

// TestIntegrationJobReleaseResumed: a job's root dies of the SIGTERM of
// its release while a child of its ignores it. The claim stays releasing
// (the root's exit recorded) until the grace has dealt with the child; a
// daemon stopped in the grace leaves it so, and the next start kills the
// child and ends the claim as exited, with the root's signal. Before, the
// root's exit ended the claim at once, and a restart in the grace left
// the child running, unwatched, for good.
func TestIntegrationJobReleaseResumed(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"cgroup", nil},
		// Without a cgroup, the members the daemon recorded are the
		// resumed teardown's: before, the restarted daemon found the
		// root gone, only reported the child, and ended the job with
		// the child running.
		{"no cgroup", []string{"--cgroup", "off"}},
	} {
		t.Run(mode.name, func(t *testing.T) { testJobReleaseResumed(t, mode.flags...) })
	}
}

func testJobReleaseResumed(t *testing.T, flags ...string) {
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, flags...)
	kid := filepath.Join(t.TempDir(), "kid")
	// The child writes its pid only once it ignores SIGTERM: written by
	// the parent at the fork, the pid could be read (and the release
	// sent) before the child had run its trap, and a loaded host killed
	// it with the root (the release then ended within the 2 s below).
	j := d.launch(t, "--detach", "--", "sh", "-c", `sh -c 'trap "" TERM; echo $$ > `+kid+`; exec sleep 1000' & wait`)
	kidPid, kidTok := readPid(t, kid)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	g := api.Duration(12 * time.Second)
	_, err := d.client.Release(ctx, j.ID, &api.ReleaseRequest{Grace: &g})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("release with a 12 s grace answered within 2 s: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return !owned(j.Pid, j.Token) }, "the job's root outlived its SIGTERM")
	testenv.Eventually(t, 10*time.Second, func() bool { return !d.claim(t, j.ID).EndedAt.IsZero() }, "the root's exit was never recorded")
	if got := d.claim(t, j.ID); got.State != store.Releasing {
		t.Errorf("in the grace, after the root's exit: state %s, want releasing (its child %d ignores SIGTERM)", got.State, kidPid)
	}
	d.term()
	if !owned(kidPid, kidTok) {
		t.Fatal("the TERM-ignoring child was killed before its grace ended")
	}
	d = startDaemon(t, state, sock, flags...)
	testenv.Eventually(t, 40*time.Second, func() bool {
		return !owned(kidPid, kidTok) && d.claim(t, j.ID).State == store.Exited
	}, "the release left in its grace was not resumed after the restart: the child %d lives, or the claim is %s", kidPid, d.claim(t, j.ID).State)
	if got := d.claim(t, j.ID); got.ExitSignal != 15 || got.Release == nil || !got.Release.Dead {
		t.Errorf("the job ended with signal %d, release %+v; want 15 (its root's SIGTERM), everything dead", got.ExitSignal, got.Release)
	}
}
