//go:build !linux && !darwin

package local

import (
	"context"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// ReadToken reads pid's token from the process table.
func ReadToken(ctx context.Context, pid int32) (token.Token, error) {
	tok, err := fallback.ReadToken(ctx, pid)
	return tok, mapErr(err)
}

// Judge judges the claim against one look at the process table, by the
// polling rules.
func Judge(ctx context.Context, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	v, err := fallback.JudgeOnce(ctx, mech, pid, claim)
	return v, mapErr(err)
}

// Kill judges and refuses to signal: without a pidfd, a signal is sent by
// pid, and nothing can bind it to the judged instance.
func Kill(ctx context.Context, mech string, pid int32, claim token.Token, o actions.Options) (actions.Outcome, error) {
	v, err := Judge(ctx, mech, pid, claim)
	return actions.Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: v.Mechanism,
		Error: "not signalled: this system has no pidfd to bind a signal to the judged process; run the daemon on Linux, or act on the verdict yourself"}, err
}
