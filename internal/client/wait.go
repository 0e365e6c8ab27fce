package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// ErrTimeout: a wait ran out of time before the claim ended.
var ErrTimeout = errors.New("timed out")

// Exit codes of a wait (WaitCode), documented with the command.
const (
	WaitClean     = 0 // released with nothing left alive, or a job that exited 0
	WaitFailed    = 1 // a job that exited with another code, or by a signal
	WaitSurvivors = 2 // released with members left alive or unproven
	WaitUnknown   = 3 // retired, dropped, or exited with its status unknown: the supervisor lost its proof
)

// Poll intervals of a wait: from the first to the longest, doubling.
const (
	firstPoll = 50 * time.Millisecond
	maxPoll   = time.Second
)

// Final reports whether a claim in state s has ended for good: any state
// the daemon's table does not count as open (daemon.Open).
func Final(s store.State) bool { return !daemon.Open(s) }

// Wait returns claim id once it has ended (Final), asking the daemon one
// question at a time, at most every second: the daemon holds nothing for a
// waiter between its answers. It ends with ErrTimeout after timeout (0:
// none) and ErrInterrupted when ctx ends; a non-root caller waits only for
// its own claims (the daemon answers not found for another's).
func Wait(ctx context.Context, c *api.Client, id string, timeout time.Duration) (api.Claim, error) {
	return poll(ctx, timeout, "claim "+id, func(ctx context.Context) (api.Claim, bool, error) {
		cl, err := c.Get(ctx, id)
		return cl, err == nil && Final(cl.State), err
	})
}

// WaitProcess returns the daemon's verdict on (pid, tok) once it is no
// longer OWNED (the process has exited, or the pid was reissued); as Wait.
func WaitProcess(ctx context.Context, c *api.Client, pid int32, tok token.Token, timeout time.Duration) (verdict.Verdict, error) {
	return poll(ctx, timeout, fmt.Sprintf("%d@%s", pid, tok), func(ctx context.Context) (verdict.Verdict, bool, error) {
		v, err := c.Verify(ctx, pid, tok)
		return v, err == nil && v.Result != verdict.Owned, err
	})
}

// poll calls ask until it says done or fails, backing off from firstPoll
// to maxPoll between calls.
func poll[T any](ctx context.Context, timeout time.Duration, what string, ask func(context.Context) (T, bool, error)) (T, error) {
	parent := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for next := firstPoll; ; next = min(2*next, maxPoll) {
		var last T
		select {
		case <-t.C:
			v, done, err := ask(ctx)
			if err == nil && done {
				return v, nil
			}
			if err != nil && ctx.Err() == nil {
				return v, err
			}
			last = v
			t.Reset(next)
		case <-ctx.Done():
		}
		switch {
		case parent.Err() != nil:
			return last, fmt.Errorf("%w: stopped waiting for %s; it goes on", ErrInterrupted, what)
		case ctx.Err() != nil:
			return last, fmt.Errorf("waiting for %s: %w after %v", what, ErrTimeout, timeout)
		}
	}
}

// WaitCode is the exit code of a wait that saw claim c end. A job whose
// exit status is unknown (it ended while the daemon was stopped; its
// program may not even have started) is WaitUnknown, not WaitFailed: it
// cannot be told from a job that ran and failed.
func WaitCode(c api.Claim) int {
	switch {
	case c.State == store.Exited && c.ExitCode != nil && *c.ExitCode == 0 && c.ExitSignal == 0:
		return WaitClean
	case c.State == store.Exited && c.ExitCode == nil && c.ExitSignal == 0:
		return WaitUnknown
	case c.State == store.Exited:
		return WaitFailed
	case c.State == store.Released && (c.Release == nil || c.Release.Dead):
		return WaitClean
	case c.State == store.Released:
		return WaitSurvivors
	}
	return WaitUnknown
}
