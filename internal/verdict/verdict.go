// Package verdict judges a claim (pid, start token) against the process that
// holds the pid now: OWNED, FOREIGN, GONE or UNVERIFIABLE, with a reason a
// person can read and the mechanism that decided it.
//
// On Linux the judge binds a pidfd before it reads anything (internal/pidfd),
// so an OWNED verdict comes with a handle that names exactly the judged
// instance; signals go through that handle and cannot reach a process that
// took the pid over afterwards. Where a lineage observer is attached, a
// claim the observer watched without a gap can be proven beyond what the
// token alone says (and an observed exit-then-fork names the reissue).
package verdict

import (
	"fmt"

	"github.com/procsupervisor/supervisor/internal/token"
)

// Result is the outcome of judging a claim.
type Result uint8

// Results. The zero value is not a result.
const (
	// Owned: the process at the pid is provably the claimed instance.
	Owned Result = iota + 1
	// Foreign: the pid is live and provably held by a different instance.
	Foreign
	// Gone: no live process is the claimed instance.
	Gone
	// Unverifiable: the mechanism cannot prove either way.
	Unverifiable
)

var names = [...]string{"", "OWNED", "FOREIGN", "GONE", "UNVERIFIABLE"}

func (r Result) String() string {
	if int(r) < len(names) && r != 0 {
		return names[r]
	}
	return "INVALID"
}

// ParseResult parses the word form.
func ParseResult(s string) (Result, error) {
	for i, n := range names {
		if i > 0 && n == s {
			return Result(i), nil
		}
	}
	return 0, fmt.Errorf("unknown verdict %q", s)
}

// MarshalText implements encoding.TextMarshaler.
func (r Result) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Result) UnmarshalText(b []byte) error {
	v, err := ParseResult(string(b))
	*r = v
	return err
}

// Verdict is the judgement of one claim.
type Verdict struct {
	Pid       int32       `json:"pid"`
	Token     token.Token `json:"token"`
	Result    Result      `json:"verdict"`
	Reason    string      `json:"reason"`
	Mechanism string      `json:"mechanism"`
	// Observed is the token of the process that holds the pid now, when one
	// does and it was read.
	Observed token.Token `json:"observed_token,omitzero"`
	// Transient marks an UNVERIFIABLE that says nothing of the process:
	// the judge itself ran short of a resource (pidfd.ErrResource), and
	// the same question may be answered later. No decision about a claim
	// rests on it (the daemon judges the claim again at its next pass).
	Transient bool `json:"-"`
}

// String renders the verdict for a log or a person.
func (v Verdict) String() string {
	return fmt.Sprintf("pid %d: %s (%s; by %s)", v.Pid, v.Result, v.Reason, v.Mechanism)
}
