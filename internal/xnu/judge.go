package xnu

import (
	"errors"
	"fmt"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Mechanism names this package in verdicts and outcomes.
const Mechanism = "xnu:proc_pidinfo"

// Judge judges the claim (pid, claim) against one identity reply and
// returns that reply: a signal for an OWNED verdict is built from it
// (Ident.AuditToken), so it names the judged instance at the judged exec
// generation. The rules:
//
//   - No live process at pid (absent or a zombie): GONE.
//   - A claim from another boot for a held pid: FOREIGN.
//   - A claim with a uniqueid: FOREIGN when the reply's differs; OWNED when
//     it matches (and the start time, where it was read, matches too).
//   - A claim without one: the start times in µs decide (token.Compare), as
//     the sysctl mechanism does; without a readable start time,
//     UNVERIFIABLE.
func Judge(k Kernel, boot procfs.BootID, pid int32, claim token.Token) (verdict.Verdict, Ident) {
	v := verdict.Verdict{Pid: pid, Token: claim, Mechanism: Mechanism}
	set := func(r verdict.Result, why string) verdict.Verdict { v.Result, v.Reason = r, why; return v }
	if claim.IsZero() {
		return set(verdict.Unverifiable, "the claim has no start token"), Ident{}
	}
	id, err := k.Identity(pid)
	switch {
	case errors.Is(err, ErrNoProcess):
		return set(verdict.Gone, "no live process holds the pid (a zombie of it counts as gone)"), Ident{}
	case err != nil:
		return set(verdict.Unverifiable, fmt.Sprintf("proc_pidinfo failed: %v", err)), Ident{}
	}
	obs := id.Token(boot)
	v.Observed = obs
	switch {
	case claim.Boot != boot:
		return set(verdict.Foreign, "the claim is from another boot and the pid is held now"), id
	case claim.Uniq != 0 && claim.Uniq != id.UniqueID:
		return set(verdict.Foreign, fmt.Sprintf("XNU uniqueid %d differs from the claim's %d: the pid was reissued", id.UniqueID, claim.Uniq)), id
	case claim.Uniq != 0 && obs.IsZero():
		return set(verdict.Owned, "XNU uniqueid matches (never reused within a boot)"), id
	case obs.IsZero():
		return set(verdict.Unverifiable, "the claim has no XNU uniqueid and the start time of the process could not be read"), id
	}
	m, why := token.Compare(claim, obs)
	switch m {
	case token.Same:
		return set(verdict.Owned, why), id
	case token.Different, token.OtherBoot:
		return set(verdict.Foreign, why), id
	}
	return set(verdict.Unverifiable, why), id
}

// ReadToken reads pid's token: start time in µs and uniqueid. A zombie or
// an absent pid wraps ErrNoProcess.
func ReadToken(k Kernel, boot procfs.BootID, pid int32) (token.Token, error) {
	id, err := k.Identity(pid)
	if err != nil {
		return token.Token{}, err
	}
	tok := id.Token(boot)
	if tok.IsZero() {
		return tok, fmt.Errorf("process %d: its start time could not be read", pid)
	}
	return tok, nil
}

// withStart completes a flavor 17 reply (ids, no start time) with a start
// time read by other means (kern.proc) for a process of another uid: the
// start time is read between two flavor 17 replies, and only equal
// uniqueids before and after prove it is this instance's. Otherwise the
// later reply is returned without a start time.
func withStart(read17 func() (Ident, error), start func() (uint64, error)) (Ident, error) {
	before, err := read17()
	if err != nil {
		return Ident{}, err
	}
	st, serr := start()
	after, err := read17()
	if err != nil {
		return Ident{}, err
	}
	if serr == nil && after.UniqueID == before.UniqueID {
		after.StartMicro = st
	}
	return after, nil
}
