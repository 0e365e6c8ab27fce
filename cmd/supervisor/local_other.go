//go:build !linux

package main

import (
	"context"
	"errors"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// readToken reads pid's token from the process table (microseconds from
// sysctl on macOS).
func readToken(ctx context.Context, pid int32) (token.Token, error) {
	tok, err := fallback.ReadToken(ctx, pid)
	return tok, localFail(err)
}

// judgeLocal judges the claim against one snapshot, by the polling rules.
func judgeLocal(ctx context.Context, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	v, err := fallback.JudgeOnce(ctx, mech, pid, claim)
	return v, localFail(err)
}

// localFail maps an error of the fallback package to an exit code.
func localFail(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fallback.ErrNoProcess):
		return fail(exitNoProcess, "%v", err)
	case errors.Is(err, fallback.ErrUnavailable):
		return fail(exitUnavailable, "%v", err)
	case errors.Is(err, token.ErrMalformed):
		return fail(exitData, "%v", err)
	}
	return fail(exitSoftware, "%v", err)
}

// killLocal refuses: without a pidfd, a signal is sent by pid, and nothing
// can bind it to the judged instance. Judging is still available (verify).
func killLocal(ctx context.Context, mech string, pid int32, claim token.Token, grace time.Duration) (actions.Outcome, error) {
	v, err := judgeLocal(ctx, mech, pid, claim)
	out := actions.Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: v.Mechanism,
		Error: "not signalled: this system has no pidfd to bind a signal to the judged process; run the daemon on Linux, or act on the verdict yourself"}
	return out, err
}
