package daemon

import (
	"testing"

	"github.com/procsupervisor/supervisor/internal/verdict"
)

func TestCause(t *testing.T) {
	for _, c := range []struct {
		t      Trigger
		orphan bool
		root   verdict.Result
		want   string
	}{
		{ReleaseAsked, false, verdict.Owned, "requested"},
		{ReleaseAsked, true, verdict.Gone, "requested"},
		{WallClock, false, verdict.Owned, "wall clock"},
		{WallClock, true, verdict.Owned, "wall clock"},
		{HolderExit, true, verdict.Owned, "holder gone"},
		{Pass, true, verdict.Owned, "holder gone"},
		{Pass, false, verdict.Gone, "root exited"},
		{Startup, false, verdict.Gone, "root exited"},
		{Startup, false, verdict.Foreign, "pid reissued"},
		{Startup, false, verdict.Unverifiable, "startup"},
	} {
		if got := Cause(c.t, c.orphan, c.root); got != c.want {
			t.Errorf("Cause(%v, %v, %v) = %q, want %q", c.t, c.orphan, c.root, got, c.want)
		}
	}
}
