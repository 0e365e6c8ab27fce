package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Exit codes. A verdict is its own code (0-3); kill has its own three; the
// rest follow sysexits.h. README.md documents each command's codes.
const (
	exitOK = 0 // the command did what it was asked

	exitOwned        = 0 // verify: the claim is the process at PID
	exitForeign      = 1 // verify: another process holds PID
	exitGone         = 2 // verify: the claimed process has exited
	exitUnverifiable = 3 // verify: the claim cannot be proven either way

	exitKillDead      = 0 // kill: everything targeted is dead
	exitKillForbidden = 1 // kill: the verdict forbade acting
	exitKillSurvivors = 2 // kill, release: survivors or unproven members remain

	exitUsage       = 64 // bad arguments (EX_USAGE)
	exitData        = 65 // malformed input, a token (EX_DATAERR)
	exitNoProcess   = 66 // no such process or claim (EX_NOINPUT)
	exitUnavailable = 69 // a mechanism or the daemon cannot serve here (EX_UNAVAILABLE)
	exitSoftware    = 70 // internal or system error (EX_SOFTWARE)
	exitNoPerm      = 77 // the daemon refused the caller (EX_NOPERM)
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// fail returns an error that prints its message and exits with code.
func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// silentExit ends the command with a code and nothing on stderr (the
// command has already said what it had to).
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit %d", int(s)) }

func verdictCode(r verdict.Result) int {
	switch r {
	case verdict.Owned:
		return exitOwned
	case verdict.Foreign:
		return exitForeign
	case verdict.Gone:
		return exitGone
	}
	return exitUnverifiable
}

func killCode(out actions.Outcome) int {
	switch {
	case out.Dead:
		return exitKillDead
	case !out.Acted && len(out.Unproven) == 0:
		return exitKillForbidden
	}
	return exitKillSurvivors
}

// apiFail maps an error of the daemon's client to an exit code.
func apiFail(err error) error {
	var ae *api.Error
	switch {
	case errors.Is(err, api.ErrNoDaemon):
		return fail(exitUnavailable, "%v", daemon.ExplainUnreachable(err, dialed))
	case errors.Is(err, api.ErrSocketDenied):
		return fail(exitNoPerm, "%v", err)
	case !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500:
		return fail(exitSoftware, "%v", err)
	case ae.Status == http.StatusForbidden:
		return fail(exitNoPerm, "%s", ae.Message)
	case ae.Status == http.StatusNotFound:
		return fail(exitNoProcess, "%s", ae.Message)
	case ae.Status == http.StatusConflict:
		return fail(exitUnverifiable, "%s", ae.Message)
	}
	return fail(exitUsage, "%s", ae.Message)
}

// runCode maps an error of daemon.Run to the exit code of `supervisor run`.
func runCode(err error) int {
	switch {
	case errors.Is(err, daemon.ErrConfig), errors.Is(err, tracker.ErrUnknownMechanism):
		return exitUsage
	case errors.Is(err, daemon.ErrAlreadyRunning), errors.Is(err, daemon.ErrMechanism), errors.Is(err, daemon.ErrUnsupported):
		return exitUnavailable
	}
	return exitSoftware
}

// localFail maps an error of the local path to an exit code.
func localFail(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tracker.ErrUnknownMechanism):
		return fail(exitUsage, "--mechanism: %v", err)
	case errors.Is(err, local.ErrNoProcess):
		return fail(exitNoProcess, "%v", err)
	case errors.Is(err, local.ErrNotProcess):
		return fail(exitUsage, "%v", err)
	case errors.Is(err, local.ErrUnavailable):
		return fail(exitUnavailable, "%v", err)
	}
	return fail(exitSoftware, "%v", err)
}
