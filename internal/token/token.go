// Package token defines the start token: the identity of one process
// instance, as opposed to the pid that names it only until the kernel
// reissues it.
//
// A Linux token is the boot id, the start time in clock ticks since boot
// (/proc/PID/stat field 22, or task->start_boottime from eBPF) and, where the
// kernel has pidfs (6.9+), the pidfs inode id of the process, which is never
// reused within a boot. Ticks are 10 ms wide: a privileged actor can recreate
// a pid inside one tick, and only the inode tells the two apart. Tokens from
// the polling fallback carry a coarser start time (microseconds of wall
// clock from macOS sysctl, whole seconds from ps lstart) and say so in their
// precision.
//
// A macOS token read through proc_pidinfo (internal/xnu) also carries the
// process's XNU p_uniqueid: a 64-bit id the kernel gives every fork, never
// reuses within a boot and keeps across exec. It plays the part the pidfs
// inode plays on Linux.
//
// The text form is printable, opaque to clients and versioned:
//
//	v1:t:<boot id, 32 hex>:<start ticks>:<pidfs inode or ->
//	v1:u:<boot id>:<start, µs since the epoch>:<XNU uniqueid or ->
//	v1:s:<boot id>:<start, seconds since the epoch>:-
//
// Compare is conservative: when the parts both tokens have agree and the
// finer part is missing on one side, the answer is Unproven, never Same
// (a microsecond match aside: see Compare).
package token

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// ErrMalformed reports text that is not a token of a known version.
var ErrMalformed = errors.New("malformed token")

// Precision is the unit of a token's start time.
type Precision uint8

const (
	// Ticks is clock ticks since boot (USER_HZ, 10 ms on Linux).
	Ticks Precision = 't'
	// Micro is microseconds of wall-clock time (macOS kinfo_proc).
	Micro Precision = 'u'
	// Second is whole seconds of wall-clock time (ps lstart).
	Second Precision = 's'
)

func (p Precision) valid() bool { return p == Ticks || p == Micro || p == Second }

// String names the precision for people.
func (p Precision) String() string {
	switch p {
	case Ticks:
		return "clock ticks"
	case Micro:
		return "microseconds"
	case Second:
		return "seconds"
	}
	return "unknown precision"
}

// Token identifies one process instance. The zero Token is not valid.
type Token struct {
	Boot  procfs.BootID
	Start uint64 // in units of Prec
	Ino   uint64 // pidfs inode id (Ticks tokens); 0 when unknown
	Prec  Precision
	// Uniq is the XNU p_uniqueid (Micro tokens from macOS); 0 when unknown.
	Uniq uint64
}

// IsZero reports whether t is the zero Token (no identity at all).
func (t Token) IsZero() bool { return t.Prec == 0 }

// String returns the text form.
func (t Token) String() string {
	if t.IsZero() {
		return ""
	}
	b := make([]byte, 0, 72)
	return string(t.Append(b))
}

// Append appends the text form of t to b.
func (t Token) Append(b []byte) []byte {
	b = append(b, 'v', '1', ':', byte(t.Prec), ':')
	b = append(b, bootHex(t.Boot)[:]...)
	b = append(b, ':')
	b = strconv.AppendUint(b, t.Start, 10)
	b = append(b, ':')
	id := t.Ino
	if t.Prec == Micro {
		id = t.Uniq
	}
	if id == 0 {
		return append(b, '-')
	}
	return strconv.AppendUint(b, id, 10)
}

// bootText is a boot id with its 32 hex digits.
type bootText struct {
	id  procfs.BootID
	hex [32]byte
}

// lastBoot keeps the hex of the boot id last written: nearly every token a
// process writes names the boot it runs in, and four tokens in a line
// spelled digit by digit were a tenth of an event line's encoding.
var lastBoot atomic.Pointer[bootText]

// bootHex returns the hex digits of id, from lastBoot when it is that id.
func bootHex(id procfs.BootID) *[32]byte {
	if p := lastBoot.Load(); p != nil && p.id == id {
		return &p.hex
	}
	const hexdigits = "0123456789abcdef"
	p := &bootText{id: id}
	for i, c := range id {
		p.hex[2*i], p.hex[2*i+1] = hexdigits[c>>4], hexdigits[c&15]
	}
	lastBoot.Store(p)
	return &p.hex
}

// MarshalText implements encoding.TextMarshaler. The zero Token marshals
// to "", as String renders it.
func (t Token) MarshalText() ([]byte, error) {
	if t.IsZero() {
		return []byte{}, nil
	}
	return t.Append(nil), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. "" is the zero Token;
// a caller that needs an identity checks IsZero.
func (t *Token) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*t = Token{}
		return nil
	}
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Parse parses the text form of a token. Errors wrap ErrMalformed.
func Parse(s string) (Token, error) {
	var t Token
	if len(s) > 128 {
		return t, fmt.Errorf("token of %d bytes: %w", len(s), ErrMalformed)
	}
	parts := strings.Split(s, ":")
	if len(parts) != 5 {
		return t, fmt.Errorf("token %q: want 5 colon-separated parts: %w", s, ErrMalformed)
	}
	if parts[0] != "v1" {
		return t, fmt.Errorf("token %q: unknown version %q: %w", s, parts[0], ErrMalformed)
	}
	if len(parts[1]) != 1 || !Precision(parts[1][0]).valid() {
		return t, fmt.Errorf("token %q: unknown precision %q: %w", s, parts[1], ErrMalformed)
	}
	t.Prec = Precision(parts[1][0])
	if len(parts[2]) != 32 || strings.ToLower(parts[2]) != parts[2] {
		return Token{}, fmt.Errorf("token %q: boot id is not 32 lower-case hex digits: %w", s, ErrMalformed)
	}
	boot, err := procfs.ParseBootID(parts[2])
	if err != nil {
		return Token{}, fmt.Errorf("token %q: %w", s, ErrMalformed)
	}
	t.Boot = boot
	if t.Start, err = parseUint(parts[3]); err != nil {
		return Token{}, fmt.Errorf("token %q: start time: %w", s, ErrMalformed)
	}
	if parts[4] != "-" {
		id, err := parseUint(parts[4])
		switch {
		case t.Prec == Second:
			return Token{}, fmt.Errorf("token %q: an instance id only goes with a ticks or microseconds token: %w", s, ErrMalformed)
		case err != nil || id == 0:
			return Token{}, fmt.Errorf("token %q: instance id (pidfs inode or XNU uniqueid): %w", s, ErrMalformed)
		case t.Prec == Ticks:
			t.Ino = id
		default:
			t.Uniq = id
		}
	}
	return t, nil
}

// parseUint accepts only canonical decimal (no sign, no leading zeros), so
// that every token has exactly one text form.
func parseUint(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || s[0] == '+' {
		return 0, ErrMalformed
	}
	return strconv.ParseUint(s, 10, 64)
}

// Match is the outcome of comparing a claimed token with an observed one.
type Match uint8

const (
	// Unproven: the tokens agree as far as both go, but the coarser one cannot
	// tell the instances apart (or they cannot be compared at all).
	Unproven Match = iota
	// Same: the tokens provably name the same instance.
	Same
	// Different: the tokens provably name different instances.
	Different
	// OtherBoot: the claim was made during another boot; its instance is gone.
	OtherBoot
)

func (m Match) String() string {
	switch m {
	case Same:
		return "same"
	case Different:
		return "different"
	case OtherBoot:
		return "other boot"
	}
	return "unproven"
}

// Compare judges whether the claim and the observed token name the same
// process instance, and says why in a short constant phrase. It never answers
// Same unless the token alone proves it.
func Compare(claim, observed Token) (Match, string) {
	if claim.IsZero() || observed.IsZero() {
		return Unproven, "no token to compare"
	}
	if claim.Boot != observed.Boot {
		return OtherBoot, "token is from another boot"
	}
	if claim.Prec != observed.Prec {
		return Unproven, "tokens of different precision cannot be compared"
	}
	if claim.Start != observed.Start {
		return Different, "start time differs: the pid was reissued"
	}
	switch {
	case claim.Ino != 0 && observed.Ino != 0:
		if claim.Ino == observed.Ino {
			return Same, "start time and pidfs inode match"
		}
		return Different, "same start time, different pidfs inode: the pid was reissued within one clock tick"
	case claim.Uniq != 0 && observed.Uniq != 0:
		if claim.Uniq == observed.Uniq {
			return Same, "start time and XNU uniqueid match"
		}
		return Different, "same start time, different XNU uniqueid: the pid was reissued within one microsecond"
	case claim.Prec == Ticks:
		return Unproven, "start time matches, but without a pidfs inode on both sides a reissue within the same clock tick cannot be ruled out"
	case claim.Prec == Micro:
		// A reissue needs the old instance to start, exit and be reaped, and
		// a new fork to land on the pid, all inside one microsecond.
		return Same, "start time matches to the microsecond"
	default:
		return Unproven, "start time matches to the second, which does not rule out a reissue within the same second"
	}
}

// Instance is one process instance by identity, (pid, token): the one
// instance type of the project (actions.Member, store.Instance and
// api.Instance are this type). Reason, when set, says why the instance was
// reported instead of acted on.
type Instance struct {
	Pid    int32  `json:"pid"`
	Token  Token  `json:"token"`
	Reason string `json:"reason,omitempty"`
}
