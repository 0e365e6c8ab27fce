package fallback

import (
	"context"
	"errors"
	"fmt"

	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Errors of ReadToken and JudgeOnce that callers must tell apart. The
// errors returned wrap them; their text is the detail alone.
var (
	// ErrNoProcess: the pid is not in the process table, or its process
	// has exited and waits to be reaped.
	ErrNoProcess = errors.New("no such process")
	// ErrUnavailable: the mechanism cannot run on this system, or its look
	// at the process table failed.
	ErrUnavailable = errors.New("process table unavailable")
)

// kindError is an error whose text is its detail alone, and which errors.Is
// also matches to kind.
type kindError struct {
	error
	kind error
}

func (e kindError) Unwrap() []error { return []error{e.error, e.kind} }

func errorOf(kind error, format string, args ...any) error {
	return kindError{fmt.Errorf(format, args...), kind}
}

// ReadToken reads pid's start token from one look at the process table by
// sysctl (microseconds, macOS only). Its error wraps ErrNoProcess when pid
// is not there or is a zombie, ErrUnavailable when the table cannot be read.
func ReadToken(ctx context.Context, pid int32) (token.Token, error) {
	return readToken(ctx, NewSysctl(), pid)
}

func readToken(ctx context.Context, s Snapshotter, pid int32) (token.Token, error) {
	snap, err := snapshot(ctx, s, "")
	if err != nil {
		return token.Token{}, err
	}
	e := snap.Lookup(pid)
	switch {
	case e == nil:
		return token.Token{}, errorOf(ErrNoProcess, "no process %d", pid)
	case e.Zombie():
		return token.Token{}, errorOf(ErrNoProcess, "process %d has exited (a zombie awaiting reaping)", pid)
	case e.Partial():
		return token.Token{}, fmt.Errorf("process %d: no start time in the process table", pid)
	}
	return e.Token, nil
}

// JudgeOnce judges the claim (pid, claim) by Judge's rules against one look
// at the process table, taken by mech: sysctl for "" or "auto", or ps. A
// look that cannot be taken is an UNVERIFIABLE verdict that says why, not
// an error.
func JudgeOnce(ctx context.Context, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	var s Snapshotter
	switch mech {
	case "", "auto":
		s = NewSysctl()
	case "ps":
		s = NewPS(PSOptions{})
	}
	return judgeOnce(ctx, s, mech, pid, claim)
}

// judgeOnce is JudgeOnce with its snapshotter; s is nil for a mechanism
// that cannot run here.
func judgeOnce(ctx context.Context, s Snapshotter, mech string, pid int32, tok token.Token) (verdict.Verdict, error) {
	v := verdict.Verdict{Pid: pid, Token: tok}
	snap, err := snapshot(ctx, s, mech)
	if err != nil {
		v.Result, v.Reason, v.Mechanism = verdict.Unverifiable, err.Error(), mech
		return v, nil
	}
	v.Mechanism = string(snap.Mechanism)
	v.Result, v.Reason = Judge(Claim{Pid: pid, Token: tok}, snap, nil)
	if e := snap.Lookup(pid); e != nil && !e.Token.IsZero() {
		v.Observed = e.Token
	}
	return v, nil
}

// snapshot takes one look with s, the snapshotter of mech (nil when mech
// cannot run here). Its error wraps ErrUnavailable.
func snapshot(ctx context.Context, s Snapshotter, mech string) (*Snapshot, error) {
	if s == nil {
		return nil, errorOf(ErrUnavailable, "mechanism %s cannot run on this system (sysctl or ps)", mech)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return nil, errorOf(ErrUnavailable, "%s: %w", s.Mechanism(), err)
	}
	return snap, nil
}
