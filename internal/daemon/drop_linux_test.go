package daemon

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestDropTwice: a claim two callers drop at once (two failed launches of
// one user pruning its oldest failed claim) is no store fault for the
// second: every concurrent failed launch counted one, shown to every user
// in status as store errors.
func TestDropTwice(t *testing.T) {
	h := newHarness(t)
	if _, err := h.d.Launch(context.Background(), api.Peer{Pid: int32(os.Getpid())},
		&api.LaunchRequest{Argv: []string{"/nonexistent/program"}, Cwd: "/"}); err == nil {
		t.Fatal("a launch of a program that does not exist succeeded")
	}
	claims, err := h.d.st.List(store.Filter{})
	if err != nil || len(claims) != 1 {
		t.Fatalf("%d claims (%v), want the failed launch's", len(claims), err)
	}
	h.d.drop(claims[0])
	h.d.drop(claims[0])
	if n := h.d.storeErrors.Load(); n != 0 {
		t.Errorf("%d store errors after a claim was dropped twice, want 0", n)
	}
}

// TestIntegrationReapPassesOverTeardown: root's reap reports a teardown in
// progress instead of joining it: joined, a user's release with a long
// grace held root's reap for the whole grace (a review's 40 s).
func TestIntegrationReapPassesOverTeardown(t *testing.T) {
	h := newHarness(t)
	root := api.Peer{Pid: int32(os.Getpid())}
	cl, err := h.d.Launch(context.Background(), root,
		&api.LaunchRequest{Argv: []string{"/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"}, Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	long, short := api.Duration(time.Minute), api.Duration(time.Millisecond)
	released := make(chan error, 1)
	go func() {
		_, err := h.d.Release(context.Background(), root, cl.ID, &api.ReleaseRequest{Grace: &long})
		released <- err
	}()
	testenv.Eventually(t, 10*time.Second, func() bool { return h.d.work.get(cl.ID) != nil }, "the teardown did not start")
	// Before, the reap joined the teardown and returned with it, a
	// minute on.
	rep, err := h.d.Reap(context.Background(), root, &api.ReapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Items, func(it api.ReportItem) bool { return it.ID == cl.ID && it.Reason == inProgress }) {
		t.Errorf("reap's report %+v does not name the claim whose teardown it went over", rep.Items)
	}
	if h.d.work.get(cl.ID) == nil {
		t.Error("root's reap returned once the teardown had ended, want at once")
	}
	// End the teardown: a release with a shorter grace brings it forward.
	if _, err := h.d.Release(context.Background(), root, cl.ID, &api.ReleaseRequest{Grace: &short}); err != nil {
		t.Error(err)
	}
	if err := <-released; err != nil {
		t.Error(err)
	}
}
