package local

import (
	"context"
	"errors"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/execcache"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func boot() (procfs.BootID, error) {
	b, err := procfs.ReadBootID("/proc")
	if err != nil {
		return b, mark(ErrUnavailable, err)
	}
	return b, nil
}

// ReadToken reads pid's token through a pidfd bound to it.
func ReadToken(ctx context.Context, pid int32) (token.Token, error) {
	b, err := boot()
	if err != nil {
		return token.Token{}, err
	}
	tok, err := pidfd.ReadToken(pid, b)
	switch {
	case errors.Is(err, pidfd.ErrGone):
		return tok, mark(ErrNoProcess, err)
	case errors.Is(err, pidfd.ErrNotProcess):
		return tok, mark(ErrNotProcess, err)
	case errors.Is(err, pidfd.ErrNotSupported):
		return tok, mark(ErrUnavailable, err)
	}
	return tok, err
}

// Start starts the named event mechanism for this boot, onEvent (may be
// nil) seeing every event, its exec arguments rewritten by rules (nil for
// none) before it does. An unknown name wraps
// tracker.ErrUnknownMechanism; one that cannot run, ErrUnavailable.
func Start(ctx context.Context, mech string, onEvent func(*events.Event), rules *redact.Rules) (*tracker.Tracker, error) {
	b, err := boot()
	if err != nil {
		return nil, err
	}
	return start(ctx, mech, b, onEvent, rules)
}

func start(ctx context.Context, mech string, b procfs.BootID, onEvent func(*events.Event), rules *redact.Rules) (*tracker.Tracker, error) {
	opts := tracker.Options{Mechanism: mech, Boot: b, OnEvent: onEvent, Redact: rules}
	if onEvent != nil {
		// Whoever sees the events reads their exec context too (eBPF
		// captures it; netlink and polling read it from /proc).
		opts.ExecContext = func() bool { return true }
		opts.Execs = execcache.New(execcache.Config{}) // events name their parents
	}
	t, err := tracker.Start(ctx, opts)
	switch {
	case errors.Is(err, tracker.ErrUnknownMechanism):
		return nil, err
	case err != nil:
		return nil, mark(ErrUnavailable, err)
	}
	return t, nil
}

// Judge judges the claim through a pidfd. The token check needs no event
// source; a forced mechanism ("" for none) runs for the verdict, so the
// verdict names it and uses what it observed.
func Judge(ctx context.Context, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	b, err := boot()
	if err != nil {
		return verdict.Verdict{}, err
	}
	var t *tracker.Tracker
	if mech != "" {
		if t, err = start(ctx, mech, b, nil, nil); err != nil {
			return verdict.Verdict{}, err
		}
		defer t.Close()
	}
	return tracker.NewJudge(b, t).Judge(pid, claim), nil
}

// Kill tears the claim's tree down here, watching the kernel's events
// while it runs, so that children born meanwhile are caught even when
// their parent dies and init adopts them. o is the teardown's: its grace,
// the pids (the running daemon's) never signalled, with their ancestors,
// and who is told its progress.
func Kill(ctx context.Context, mech string, pid int32, claim token.Token, o actions.Options) (actions.Outcome, error) {
	b, err := boot()
	if err != nil {
		return actions.Outcome{}, err
	}
	t, err := start(ctx, mech, b, nil, nil)
	if err != nil {
		return actions.Outcome{}, err
	}
	defer t.Close()
	j := tracker.NewJudge(b, t)
	return actions.New(j, t.Finder(j), o).Run(ctx, pid, claim), nil
}
