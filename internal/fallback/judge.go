package fallback

import (
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Claim is what Judge judges: a recorded instance and when its claimant
// last knew, by its own means, that the instance held the pid (it launched
// the process and had not reaped it, or a stronger mechanism verified it).
type Claim struct {
	Pid   int32
	Token token.Token
	Since time.Time
}

// Judge judges a claim against a snapshot, with the poller's continuity
// when there is one (cont may be nil; it is used only when snap is its
// current snapshot). The rules:
//
//   - No snapshot, or one that is not a plausible table: UNVERIFIABLE.
//     Nothing is ever GONE or FOREIGN from a failed look.
//   - The pid is not in the table: GONE.
//   - The pid is held by a row without a start time: UNVERIFIABLE.
//   - The tokens (CompareAcross) prove a different instance or another
//     boot: FOREIGN. They prove the same instance (microseconds from
//     sysctl, or a pidfs inode on both sides): OWNED.
//   - The tokens agree but are too coarse to prove it (ticks without inode,
//     seconds, or two precisions): OWNED only if the claim's start time is
//     exactly the observed one, the claim was made after the token's start
//     granule closed (see settledBy: before that, an exit and a same-granule
//     reissue between the claim and the first poll look identical), and the
//     poller saw this instance in every snapshot since the claim with no
//     failed or late poll. Otherwise UNVERIFIABLE.
func Judge(c Claim, snap *Snapshot, cont *Continuity) (verdict.Result, string) {
	if snap == nil {
		return verdict.Unverifiable, "no successful snapshot of the process table"
	}
	if err := snap.plausible(); err != nil {
		return verdict.Unverifiable, "the snapshot is not a plausible process table"
	}
	if c.Token.IsZero() {
		return verdict.Unverifiable, "the claim has no start token"
	}
	e := snap.Lookup(c.Pid)
	if e == nil {
		return verdict.Gone, "the pid is not in the process table"
	}
	if e.Partial() {
		return verdict.Unverifiable, "the pid is held, but its start time could not be read"
	}
	m, why := CompareAcross(c.Token, e.Token, snap.BootTime)
	switch m {
	case token.Same:
		return verdict.Owned, why
	case token.Different:
		return verdict.Foreign, why
	case token.OtherBoot:
		return verdict.Foreign, "the claim is from another boot and the pid is held now"
	}
	if c.Token.Prec != e.Token.Prec || c.Token.Start != e.Token.Start {
		return verdict.Unverifiable, why
	}
	if !settledBy(c.Token, snap.BootTime, c.Since) {
		return verdict.Unverifiable, "start time matches, but the claim was made inside its start " + c.Token.Prec.String() + " granule: a reissue in the same granule cannot be ruled out by polling"
	}
	if cont == nil || cont.Current() != snap {
		return verdict.Unverifiable, why + "; no continuous observation to prove it"
	}
	obs := c.Token
	obs.Ino, obs.Uniq = 0, 0 // the poller's tokens carry no inode or uniqueid
	if !cont.Seen(c.Pid, obs, c.Since) {
		return verdict.Unverifiable, why + "; the poller did not see it in every snapshot since the claim (a gap, or a failed poll)"
	}
	return verdict.Owned, "start time matches and the poller saw the instance in every snapshot since the claim, which postdates its start granule"
}
