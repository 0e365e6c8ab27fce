// Package client is the command line's policy for a request: whom to ask,
// when it may act by itself, and what each failure means as an exit code.
//
// The daemon is asked first. The command line acts here, with its caller's
// own rights, only when no supervisor daemon answers on the socket (none
// listens, or what listens is not this daemon), when the daemon answers
// that it does not hold the process (api.ErrNotHeld), or when a mechanism
// is forced; it then says so on its notice writer (stderr). Any other
// answer of the daemon, a refusal above all, is the answer: nothing runs
// here behind its back.
//
// A teardown the daemon accepted runs in the daemon to its end whatever
// the client does: a client interrupted while it waits (Ctrl-C) returns
// ErrInterrupted with the command that follows the teardown (Wait).
//
// Limits: "no daemon answers" is judged by the connection alone; a daemon
// that is starting, or stopped a moment ago, reads as none.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
	"github.com/procsupervisor/supervisor/internal/view"
)

// ErrInterrupted: the client stopped waiting for the daemon (its context
// ended, on Ctrl-C); what the daemon had accepted goes on there.
var ErrInterrupted = errors.New("interrupted")

// Verify judges (pid, tok): by the daemon, whose graph has watched the
// host, unless mech forces a local mechanism or no daemon answers. The
// verdict's mechanism says which ("daemon:ebpf", "local:pidfd").
func Verify(ctx context.Context, c *api.Client, mech string, pid int32, tok token.Token, note io.Writer) (verdict.Verdict, error) {
	if mech == "" {
		v, err := c.Verify(ctx, pid, tok)
		if err == nil {
			v.Mechanism = "daemon:" + v.Mechanism
			return v, nil
		}
		if !errors.Is(err, api.ErrNoDaemon) {
			return v, err
		}
		fmt.Fprintf(note, "%v; judging here\n", err)
	}
	v, err := local.Judge(ctx, mech, pid, tok)
	v.Mechanism = "local:" + v.Mechanism
	return v, err
}

// Kill tears (pid, tok) and its verified descendants down: through the
// daemon when it holds the process (its graph knows members whose birth it
// watched long ago), here only as the package comment says, and never
// here when heldOnly: a process the daemon does not hold (or no daemon)
// is then the daemon's error, nothing signalled.
// progress, unless nil, is told each step of the teardown (Progress).
func Kill(ctx context.Context, c *api.Client, mech string, pid int32, tok token.Token, grace time.Duration, heldOnly bool, note io.Writer, progress func(string)) (actions.Outcome, error) {
	why := "--mechanism " + mech + " forces a local teardown"
	if mech == "" {
		out, err := c.KillWatch(ctx, pid, tok, &grace, progress)
		switch {
		case err == nil:
			out.Mechanism = "daemon: " + out.Mechanism
			return out, nil
		case ctx.Err() != nil:
			return out, fmt.Errorf("%w: the teardown of %d goes on in the daemon; follow it with `supervisor wait %d %s`", ErrInterrupted, pid, pid, tok)
		case heldOnly:
			return out, err // not held, no daemon: nothing signalled
		case errors.Is(err, api.ErrNotHeld):
			why = "the daemon does not hold " + fmt.Sprint(pid)
		case !errors.Is(err, api.ErrNoDaemon):
			return out, err // a refusal is the answer
		default:
			why = err.Error()
		}
		mech = "auto"
	}
	fmt.Fprintf(note, "%s; tearing it down here, with your own rights\n", why)
	// The daemon behind the socket (and its ancestors) is never signalled
	// from here; it is known by its socket's peer credentials.
	var protect []int32
	if dpid, err := c.ServerPid(ctx); err == nil {
		protect = append(protect, dpid)
	}
	out, err := local.Kill(ctx, mech, pid, tok, actions.Options{Grace: grace, Protected: protect, OnProgress: progress})
	out.Mechanism = "local: " + out.Mechanism
	return out, err
}

// Progress returns the progress function of a command that writes to w:
// each step on a line of its own, prefixed with prefix ("supervisor
// kill: SIGTERM to 3"), when w is a terminal; nil (no progress asked)
// otherwise, so that a script's stderr carries errors only.
func Progress(w io.Writer, prefix string) func(string) {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios); err != nil {
		return nil // not a terminal
	}
	return func(step string) { fmt.Fprintf(w, "%s%s\n", prefix, view.Sanitize(step)) }
}

// Release asks the daemon to tear claim id down; only the daemon can.
// progress, unless nil, is told each step of the teardown.
func Release(ctx context.Context, c *api.Client, id string, r *api.ReleaseRequest, progress func(string)) (api.ReleaseResponse, error) {
	res, err := c.ReleaseWatch(ctx, id, r, progress)
	if err != nil && ctx.Err() != nil {
		return res, fmt.Errorf("%w: the release of %s goes on in the daemon; follow it with `supervisor wait %s`", ErrInterrupted, id, id)
	}
	return res, err
}
