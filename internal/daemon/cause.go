package daemon

import "github.com/procsupervisor/supervisor/internal/verdict"

// Cause says why a claim is let go, in the words its release record keeps
// and `supervisor list` shows ("released: wall clock"): what asked, and for
// a periodic pass what it found (an orphaned grant, a root that exited).
func Cause(t Trigger, orphan bool, root verdict.Result) string {
	switch {
	case t == ReleaseAsked:
		return "requested"
	case t == WallClock:
		return "wall clock"
	case t == HolderExit || orphan:
		return "holder gone"
	case root == verdict.Gone:
		return "root exited"
	case root == verdict.Foreign:
		return "pid reissued"
	}
	return t.String()
}
