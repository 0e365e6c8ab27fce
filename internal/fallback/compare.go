package fallback

import (
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
)

// CrossTolerance is how far apart two start times of different precision
// must be before CompareAcross calls them Different. It covers the
// truncation of each side (up to 1 s for lstart), the whole seconds of the
// Linux boot time used to convert ticks to wall-clock time, and the drift of
// that boot time between two readings (NTP slewing). Anything within it is
// Unproven.
const CrossTolerance = 2 * time.Second

// userHZ is the unit of /proc start times (USER_HZ, 100 on every Linux
// architecture the supervisor builds for).
const userHZ = 100

// CompareAcross compares a claim with an observed token like token.Compare,
// and also across precisions: a ticks, microsecond or second start time is
// converted to wall-clock microseconds (ticks through bootTime, the Linux
// boot time in Unix seconds, see ReadBootTime) and the two are Different
// only when they lie more than CrossTolerance apart. Tokens of different
// precision are never Same.
func CompareAcross(claim, observed token.Token, bootTime int64) (token.Match, string) {
	if claim.IsZero() || observed.IsZero() || claim.Prec == observed.Prec {
		return token.Compare(claim, observed)
	}
	if claim.Boot != observed.Boot {
		return token.OtherBoot, "token is from another boot"
	}
	a, ok1 := wallMicros(claim, bootTime)
	b, ok2 := wallMicros(observed, bootTime)
	if !ok1 || !ok2 {
		return token.Unproven, "tokens of different precision and no boot time to convert clock ticks"
	}
	d := a - b
	if d < 0 {
		d = -d
	}
	if d > CrossTolerance.Microseconds() {
		return token.Different, "start times of different precision differ by more than 2s: the pid was reissued"
	}
	return token.Unproven, "start times of different precision agree within 2s, which does not identify the instance"
}

// wallMicros converts a token's start time to wall-clock microseconds.
func wallMicros(t token.Token, bootTime int64) (int64, bool) {
	switch t.Prec {
	case token.Micro:
		return int64(t.Start), true
	case token.Second:
		return int64(t.Start) * 1e6, true
	case token.Ticks:
		if bootTime <= 0 {
			return 0, false
		}
		return bootTime*1e6 + int64(t.Start)*(1e6/userHZ), true
	}
	return 0, false
}

// granule returns the width of a token's start time unit.
func granule(p token.Precision) time.Duration {
	switch p {
	case token.Ticks:
		return time.Second / userHZ
	case token.Micro:
		return time.Microsecond
	}
	return time.Second
}

// settledBy reports whether t is later than the end of the claim token's
// start granule plus CrossTolerance: a process still holding the pid at t
// with the claim's start time cannot be a reissue, since a reissue after
// the granule carries a later start time.
func settledBy(claim token.Token, bootTime int64, t time.Time) bool {
	start, ok := wallMicros(claim, bootTime)
	if !ok {
		return false
	}
	end := start + (granule(claim.Prec) + CrossTolerance).Microseconds()
	return t.UnixMicro() > end
}
