package local

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
	"github.com/procsupervisor/supervisor/internal/xnu"
)

// On macOS the token, the verdict and the teardown come from internal/xnu:
// proc_pidinfo replies (start µs and the kernel's uniqueid), lineage by
// p_puniqueid, and signals through proc_signal_with_audittoken (macOS
// 14.4+; below that, kill judges and says why it does not signal).
// Any other --mechanism (ps) keeps the polling rules of internal/fallback,
// and never signals.

func macBoot() (procfs.BootID, error) {
	b, err := fallback.HostBoot()
	if err != nil {
		return b, mark(ErrUnavailable, err)
	}
	return b, nil
}

// ReadToken reads pid's token from one proc_pidinfo reply: start time in
// µs and XNU uniqueid.
func ReadToken(ctx context.Context, pid int32) (token.Token, error) {
	b, err := macBoot()
	if err != nil {
		return token.Token{}, err
	}
	tok, err := xnu.ReadToken(xnu.NewSystem(), b, pid)
	if errors.Is(err, xnu.ErrNoProcess) {
		return tok, mark(ErrNoProcess, err)
	}
	return tok, err
}

// Judge judges the claim by its XNU uniqueid (or µs start time), or, for
// mechanism ps, by one look at ps.
func Judge(ctx context.Context, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	if !xnuMech(mech) {
		v, err := fallback.JudgeOnce(ctx, mech, pid, claim)
		return v, mapErr(err)
	}
	b, err := macBoot()
	if err != nil {
		return verdict.Verdict{}, err
	}
	v, _ := xnu.Judge(xnu.NewSystem(), b, pid, claim)
	return v, nil
}

// Kill tears the claim's tree down by XNU uniqueid lineage, each signal
// through the audit token of the reply that judged the member.
// o.Protected adds pids (the running daemon's) never signalled, with their ancestors.
func Kill(ctx context.Context, mech string, pid int32, claim token.Token, o actions.Options) (actions.Outcome, error) {
	if !xnuMech(mech) {
		v, err := Judge(ctx, mech, pid, claim)
		return actions.Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: v.Mechanism,
			Error: fmt.Sprintf("not signalled: mechanism %q cannot bind a signal to the judged process; use auto", mech)}, err
	}
	b, err := macBoot()
	if err != nil {
		return actions.Outcome{}, err
	}
	var w xnu.Watcher
	if q, err := xnu.NewKqueue(); err == nil {
		defer q.Close()
		w = q
	}
	return xnu.Teardown(ctx, xnu.NewSystem(), w, b, pid, claim,
		xnu.Options{Grace: o.Grace, Self: int32(os.Getpid()), Protected: o.Protected}), nil
}

// xnuMech reports whether mech means proc_pidinfo here; the others keep
// the polling rules (ps), or say they cannot run.
func xnuMech(mech string) bool { return mech == "" || mech == "auto" }
