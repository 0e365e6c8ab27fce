package main

import (
	"context"
	"errors"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// readToken reads pid's token through a pidfd bound to it.
func readToken(ctx context.Context, pid int32) (token.Token, error) {
	boot, err := bootID()
	if err != nil {
		return token.Token{}, err
	}
	tok, err := pidfd.ReadToken(pid, boot)
	switch {
	case errors.Is(err, pidfd.ErrGone):
		return tok, fail(exitNoProcess, "%v", err)
	case errors.Is(err, pidfd.ErrNotProcess):
		return tok, fail(exitUsage, "%v", err)
	case errors.Is(err, pidfd.ErrNotSupported):
		return tok, fail(exitUnavailable, "not supported on this system: %v", err)
	case err != nil:
		return tok, fail(exitSoftware, "%v", err)
	}
	return tok, nil
}

// judgeLocal judges the claim through a pidfd. The token check needs no
// event source; a forced mechanism runs for the verdict, so the verdict
// names it and uses what it observed.
func judgeLocal(ctx context.Context, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	boot, err := bootID()
	if err != nil {
		return verdict.Verdict{}, err
	}
	var t *tracker.Tracker
	if mech != "" {
		if t, err = startTracker(ctx, mech, boot, nil); err != nil {
			return verdict.Verdict{}, err
		}
		defer t.Close()
	}
	return tracker.NewJudge(boot, t).Judge(pid, claim), nil
}

// killLocal tears the tree down here, watching the kernel's events while it
// runs, so that children born meanwhile are caught even when their parent
// dies and init adopts them.
func killLocal(ctx context.Context, mech string, pid int32, claim token.Token, grace time.Duration) (actions.Outcome, error) {
	boot, err := bootID()
	if err != nil {
		return actions.Outcome{}, err
	}
	t, err := startTracker(ctx, mech, boot, nil)
	if err != nil {
		return actions.Outcome{}, err
	}
	defer t.Close()
	j := tracker.NewJudge(boot, t)
	td := actions.New(j, t.Finder(j), actions.Options{Grace: grace})
	return td.Run(ctx, pid, claim), nil
}
