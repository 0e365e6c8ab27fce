package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
	"github.com/procsupervisor/supervisor/internal/view"
)

// Exit codes of verify: a verdict is its own code.
const (
	ExitOwned        = 0 // the claim is the process at PID
	ExitForeign      = 1 // another process holds PID
	ExitGone         = 2 // the claimed process has exited
	ExitUnverifiable = 3 // the claim cannot be proven either way; the daemon would not act on it
)

// Exit codes of kill (and release's survivors).
const (
	ExitKillDead      = 0 // everything targeted is dead
	ExitKillForbidden = 1 // the verdict forbade acting
	ExitKillSurvivors = 2 // survivors or unproven members remain
)

// Exit codes of the command line that are not a command's own result;
// they follow sysexits.h, and 130 is a shell's code for SIGINT.
const (
	ExitUsage       = 64  // bad arguments (EX_USAGE)
	ExitData        = 65  // malformed input, a token (EX_DATAERR)
	ExitNoInput     = 66  // no such process or claim (EX_NOINPUT)
	ExitUnavailable = 69  // no daemon answers, or a mechanism cannot run (EX_UNAVAILABLE)
	ExitSoftware    = 70  // internal or system error (EX_SOFTWARE)
	ExitTempFail    = 75  // a wait ran out of time, or the daemon is busy or dropped the connection: retry (EX_TEMPFAIL)
	ExitNoPerm      = 77  // refused: the daemon or its socket (EX_NOPERM)
	ExitInterrupted = 130 // the client was interrupted; the daemon goes on
)

// VerdictExit is verify's exit code for a verdict.
func VerdictExit(r verdict.Result) int {
	switch r {
	case verdict.Owned:
		return ExitOwned
	case verdict.Foreign:
		return ExitForeign
	case verdict.Gone:
		return ExitGone
	}
	return ExitUnverifiable
}

// KillExit is kill's exit code for a teardown's outcome.
func KillExit(out actions.Outcome) int {
	switch {
	case out.Dead:
		return ExitKillDead
	case !out.Acted && len(out.Unproven) == 0:
		return ExitKillForbidden
	}
	return ExitKillSurvivors
}

// Exit maps an error of a request (the daemon's client, the local path or
// this package) to an exit code and the message to print.
func Exit(err error) (int, string) {
	var ae *api.Error
	switch {
	case errors.Is(err, ErrInterrupted):
		return ExitInterrupted, err.Error()
	case errors.Is(err, ErrTimeout):
		return ExitTempFail, err.Error()
	case errors.Is(err, api.ErrDropped):
		return ExitTempFail, err.Error()
	case errors.Is(err, api.ErrSocketDenied):
		return ExitNoPerm, err.Error()
	case errors.Is(err, api.ErrNoDaemon):
		return ExitUnavailable, err.Error()
	case errors.Is(err, tracker.ErrUnknownMechanism):
		return ExitUsage, fmt.Sprintf("--mechanism: %v", err)
	case errors.Is(err, local.ErrNoProcess):
		return ExitNoInput, err.Error()
	case errors.Is(err, local.ErrNotProcess):
		return ExitUsage, err.Error()
	case errors.Is(err, local.ErrUnavailable):
		return ExitUnavailable, err.Error()
	case !errors.As(err, &ae):
		return ExitSoftware, err.Error()
	}
	msg := view.Sanitize(ae.Message)
	switch ae.Status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		// A rate limit, a quota or cap, a daemon stopping: nothing was
		// done, and the same request may succeed later (the message
		// says what to wait for).
		return ExitTempFail, msg
	}
	if ae.Status < 400 || ae.Status >= 500 {
		return ExitSoftware, err.Error()
	}
	switch ae.Status {
	case http.StatusForbidden:
		return ExitNoPerm, "the daemon refused: " + msg
	case http.StatusNotFound:
		return ExitNoInput, msg
	case http.StatusConflict:
		return ExitUnverifiable, msg
	}
	return ExitUsage, msg
}
