package main

import (
	"errors"
	"fmt"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

// Exit codes of this command line (internal/client has them all; a verdict
// is its own code 0-3, kill has its own three, the rest follow sysexits.h).
const (
	exitOK          = 0                      // the command did what it was asked
	exitUsage       = client.ExitUsage       // bad arguments
	exitData        = client.ExitData        // malformed input, a token
	exitNoProcess   = client.ExitNoInput     // no such process or claim
	exitUnavailable = client.ExitUnavailable // a mechanism or the daemon cannot serve here
	exitSoftware    = client.ExitSoftware    // internal or system error
	exitNoPerm      = client.ExitNoPerm      // the daemon or its socket refused the caller
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

// apiFail maps an error of a request (the daemon's, the local path's) to
// an exit code and a message (client.Exit).
func apiFail(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, api.ErrNoDaemon) {
		err = daemon.ExplainUnreachable(err, dialed)
	}
	code, msg := client.Exit(err)
	return fail(code, "%s", msg)
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
