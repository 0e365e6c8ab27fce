//go:build !linux

package main

import (
	"context"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// snapshot takes one look at the process table: sysctl, or ps when forced.
func snapshot(ctx context.Context, mech string) (*fallback.Snapshot, error) {
	var s fallback.Snapshotter = fallback.NewSysctl()
	if mech == "ps" {
		s = fallback.NewPS(fallback.PSOptions{})
	} else if mech != "" && mech != "auto" {
		return nil, fail(exitUnavailable, "mechanism %s cannot run on this system (sysctl or ps)", mech)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return nil, fail(exitUnavailable, "%s: %v", s.Mechanism(), err)
	}
	return snap, nil
}

// readToken reads pid's token from the process table (microseconds from
// sysctl on macOS).
func readToken(ctx context.Context, pid int32) (token.Token, error) {
	snap, err := snapshot(ctx, "")
	if err != nil {
		return token.Token{}, err
	}
	e := snap.Lookup(pid)
	switch {
	case e == nil:
		return token.Token{}, fail(exitNoProcess, "no process %d", pid)
	case e.Zombie():
		return token.Token{}, fail(exitNoProcess, "process %d has exited (a zombie awaiting reaping)", pid)
	case e.Partial():
		return token.Token{}, fail(exitSoftware, "process %d: no start time in the process table", pid)
	}
	return e.Token, nil
}

// judgeLocal judges the claim against one snapshot, by the polling rules.
func judgeLocal(ctx context.Context, mech string, pid int32, claim string) (verdict.Verdict, error) {
	v := verdict.Verdict{Pid: pid, Token: claim}
	tok, err := token.Parse(claim)
	if err != nil {
		return v, fail(exitData, "%v", err)
	}
	snap, err := snapshot(ctx, mech)
	if err != nil {
		v.Result, v.Reason, v.Mechanism = verdict.Unverifiable, err.Error(), mech
		return v, nil
	}
	v.Mechanism = string(snap.Mechanism)
	v.Result, v.Reason = fallback.Judge(fallback.Claim{Pid: pid, Token: tok}, snap, nil)
	if e := snap.Lookup(pid); e != nil && !e.Token.IsZero() {
		v.Observed = e.Token.String()
	}
	return v, nil
}

// killLocal refuses: without a pidfd, a signal is sent by pid, and nothing
// can bind it to the judged instance. Judging is still available (verify).
func killLocal(ctx context.Context, mech string, pid int32, claim string, grace time.Duration) (actions.Outcome, error) {
	v, err := judgeLocal(ctx, mech, pid, claim)
	out := actions.Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: v.Mechanism,
		Error: "not signalled: this system has no pidfd to bind a signal to the judged process; run the daemon on Linux, or act on the verdict yourself"}
	return out, err
}
