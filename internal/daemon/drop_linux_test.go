package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
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
