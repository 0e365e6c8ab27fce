package store

import (
	"crypto/rand"
	"fmt"
	"github.com/procsupervisor/supervisor/internal/token"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Kind says what a claim is.
type Kind string

// Kinds.
const (
	// Grant: a contained process tree, optionally bound to a holder
	// process, torn down when it is released or orphaned.
	Grant Kind = "grant"
	// Job: a detached process that outlives a daemon restart; its exit
	// code and output are kept until its caller picks them up.
	Job Kind = "job"
)

func (k Kind) valid() bool { return k == Grant || k == Job }

func (k Kind) prefix() string {
	switch k {
	case Grant:
		return "g-"
	case Job:
		return "j-"
	}
	return ""
}

// State is where a claim is in its life.
type State string

// States. Which ones a kind goes through, and which count as open, is the
// daemon's business (its verdict table); the store only refuses words it
// does not know.
const (
	// Running: the claimed process is (believed) alive and held.
	Running State = "running"
	// Releasing: a teardown of the claim's tree is in progress.
	Releasing State = "releasing"
	// Survivors: a teardown left members alive (Release lists them); the
	// reaper tries again on every pass.
	Survivors State = "survivors"
	// Unverifiable: kept and reported; never signalled.
	Unverifiable State = "unverifiable"
	// Released: a grant torn down or let go; Release says how it went.
	Released State = "released"
	// Dropped: the pid was found FOREIGN; nothing was signalled.
	Dropped State = "dropped"
	// Exited: a job whose process ended; ExitCode or ExitSignal is set.
	Exited State = "exited"
	// Retired: a job given up on (FOREIGN or UNVERIFIABLE at reconcile);
	// RetiredReason says why and the result is still owed to its caller.
	Retired State = "retired"
)

var states = []State{Running, Releasing, Survivors, Unverifiable, Released, Dropped, Exited, Retired}

// States lists every state the store knows.
func States() []State { return slices.Clone(states) }

// Kinds lists every kind the store knows.
func Kinds() []Kind { return []Kind{Grant, Job} }

func (s State) valid() bool { return slices.Contains(states, s) }

// Instance is one process instance, (pid, token), and, for one reported
// instead of signalled, why.
type Instance = token.Instance

// Member is a descendant of a claim's root that the daemon saw born,
// recorded when it was seen so that a restarted daemon can re-adopt it.
type Member struct {
	Pid         int32       `json:"pid"`
	Token       token.Token `json:"token"`
	Parent      int32       `json:"parent"`
	ParentToken token.Token `json:"parent_token,omitzero"`
	BornAt      time.Time   `json:"born_at,omitzero"`
}

// Limit is a resource limit a workload got lower than the daemon's own
// (its caller's); RLIM_INFINITY is the largest uint64.
type Limit struct {
	Name string `json:"name"`
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// StartEnv is what a launched workload had just after its exec: the
// settings a job takes from its caller, or from the daemon where the
// daemon's are less favoured (internal/spawn).
type StartEnv struct {
	Umask string `json:"umask"` // octal, "0022"
	Nice  int    `json:"nice"`
	// Policy is the scheduling policy's name, "SCHED_OTHER".
	Policy string `json:"policy"`
	// IOPrio is the I/O class and level: "none", "best-effort/4",
	// "idle", "realtime/0".
	IOPrio      string `json:"ioprio"`
	OOMScoreAdj int    `json:"oom_score_adj"`
	// CPUs is the CPU affinity as a list ("0-3,6"), at most MaxCPUsText
	// bytes (cut with "...").
	CPUs string `json:"cpus"`
	// SeccompFilters counts the seccomp filters it runs under.
	SeccompFilters int `json:"seccomp_filters"`
}

// MaxCPUsText bounds StartEnv.CPUs.
const MaxCPUsText = 256

// Verdict is the last judgement of a claim's root, as the daemon logged it.
type Verdict struct {
	// Result is persisted in its word form (OWNED, FOREIGN, GONE,
	// UNVERIFIABLE); the zero Result is omitted.
	Result    verdict.Result `json:"verdict,omitzero"`
	Reason    string         `json:"reason,omitempty"`
	Mechanism string         `json:"mechanism,omitempty"`
	At        time.Time      `json:"at,omitzero"`
}

// Release summarises how a claim's tree was let go.
type Release struct {
	// Dead is true when no member of the tree was left alive.
	Dead bool `json:"dead"`
	// Escalated is true when SIGKILL was needed after the grace period.
	Escalated bool `json:"escalated,omitempty"`
	// Survivors are members still alive after teardown.
	Survivors []Instance `json:"survivors,omitempty"`
	// Unproven are processes reported, never signalled: live ones not
	// provably members, or members no rule allows signalling (protected,
	// another uid's), each with the reason.
	Unproven []Instance `json:"unproven,omitempty"`
	// SurvivorsTotal and UnprovenTotal count the whole lists when the
	// record kept only their start (0: the list is whole).
	SurvivorsTotal int `json:"survivors_total,omitempty"`
	UnprovenTotal  int `json:"unproven_total,omitempty"`
	// Ownership is the verdict on the root that decided the release.
	Ownership verdict.Result `json:"ownership,omitzero"`
	At        time.Time      `json:"at,omitzero"`
	// Cause is why the claim was let go (a short phrase the daemon
	// chooses: "requested", "wall clock", "holder gone", "root exited").
	Cause string `json:"cause,omitempty"`
	// Incomplete says why the members found may not have been the whole
	// tree (actions.Outcome.Incomplete).
	Incomplete string `json:"incomplete,omitempty"`
}

// Claim is one grant or job. The job fields (ExitCode to FollowedUp) stay
// zero on a grant; the store does not police which fields a kind uses.
//
// A daemon should Put a claim before it starts the process (Pid 0 means
// "not started yet") and Update it with the pid and token after: a crash
// in between then leaves a claim to release, not a process nobody knows.
type Claim struct {
	// ID is "g-" or "j-" and 12 base32 characters; Put assigns one when
	// it is empty. It cannot change.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Owner is a free-text label given by the caller.
	Owner string `json:"owner,omitempty"`
	// UID and GID of the API client that created the claim.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// ShareUID, when not 0, is the uid whose quotas the claim counts
	// against instead of UID's (api.Peer.Share: the user who made the
	// user namespace the client ran in).
	ShareUID uint32 `json:"share_uid,omitempty"`
	// Argv is the command as the daemon may show it: the daemon redacts
	// it before a Put (internal/redact), and a redacted argument carries
	// the marker itself, so the record needs no field of its own (an
	// older binary still reads it).
	Argv []string `json:"argv,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
	// Pid and Token name the root instance; Pid 0 means not started.
	Pid   int32       `json:"pid"`
	Token token.Token `json:"token,omitzero"`
	Pgid  int32       `json:"pgid,omitempty"`
	// Cgroup is the path of the claim's own cgroup, if it has one.
	Cgroup    string    `json:"cgroup,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	State     State     `json:"state"`

	LastVerdict *Verdict `json:"last_verdict,omitempty"`
	Release     *Release `json:"release,omitempty"`
	// Members are stored apart from the claim (see the package comment)
	// and come back in pid order.
	Members []Member `json:"-"`
	// Holder is the process a grant is bound to; nil when unbound.
	Holder *Instance `json:"holder,omitempty"`
	// GraceUntil, while a teardown is in progress (state releasing), is
	// when its grace period ends: a restarted daemon resumes it with what
	// remains.
	GraceUntil time.Time `json:"grace_until,omitzero"`
	// Grace is that teardown's whole grace period: a resumed one never
	// waits longer, whatever the wall clock did meanwhile.
	Grace time.Duration `json:"grace,omitzero"`
	// Limits are the resource limits the workload got lower than the
	// daemon's, from its caller's.
	Limits []Limit `json:"limits,omitempty"`
	// NoNewPrivs is set when the workload was started with no_new_privs:
	// asked for, or inherited from a caller that had it or a narrower
	// capability bounding set than the daemon's.
	NoNewPrivs bool `json:"no_new_privs,omitempty"`
	// Started is what the workload had just after its exec, as the
	// daemon read it from the process: what its caller's settings and the
	// daemon's gave it. Nil when it had ended before it could be read.
	Started *StartEnv `json:"started,omitempty"`
	// WallClock is the grant's time limit (0 = none); Deadline is when
	// it runs out.
	WallClock time.Duration `json:"wall_clock,omitzero"`
	Deadline  time.Time     `json:"deadline,omitzero"`

	// Job fields.
	ExitCode      *int      `json:"exit_code,omitempty"`
	ExitSignal    int       `json:"exit_signal,omitempty"`
	EndedAt       time.Time `json:"ended_at,omitzero"`
	OutputPath    string    `json:"output_path,omitempty"`
	RetiredReason string    `json:"retired_reason,omitempty"`
	// FollowedUp is true once the caller picked the result up; until then
	// the result is owed.
	FollowedUp bool `json:"followed_up,omitempty"`

	// Rev counts the writes of this claim (1 after Put); set by the store.
	Rev uint64 `json:"rev"`
	// UpdatedAt is when the store last wrote the claim; set by the store.
	UpdatedAt time.Time `json:"updated_at"`
}

const (
	idRandLen = 12
	idLen     = 2 + idRandLen
	idAlpha   = "abcdefghijklmnopqrstuvwxyz234567"
)

// NewID returns a fresh random ID for a claim of kind k: "g-" or "j-" and
// 12 base32 characters (60 random bits). It panics on an unknown kind.
func NewID(k Kind) string {
	if !k.valid() {
		panic(fmt.Sprintf("store.NewID: unknown kind %q", k))
	}
	var r [8]byte
	_, _ = rand.Read(r[:]) // never fails since Go 1.24
	v := uint64(r[0]) | uint64(r[1])<<8 | uint64(r[2])<<16 | uint64(r[3])<<24 |
		uint64(r[4])<<32 | uint64(r[5])<<40 | uint64(r[6])<<48 | uint64(r[7])<<56
	b := make([]byte, idLen)
	copy(b, k.prefix())
	for i := 2; i < idLen; i++ {
		b[i] = idAlpha[v&31]
		v >>= 5
	}
	return string(b)
}

// ValidID reports whether id is well formed for kind k.
func ValidID(k Kind, id string) bool {
	if !k.valid() || len(id) != idLen || id[:2] != k.prefix() {
		return false
	}
	for i := 2; i < idLen; i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// kindOf returns the kind an ID's prefix names, or "".
func kindOf(id string) Kind {
	for _, k := range []Kind{Grant, Job} {
		if ValidID(k, id) {
			return k
		}
	}
	return ""
}

// Limits bound what one write may store. The zero value of a field means
// its default (see DefaultLimits).
type Limits struct {
	MaxString    int // bytes in any one string (argv entry, cwd, token, reason...)
	MaxArgs      int // entries in Argv
	MaxArgvBytes int // bytes in all of Argv
	MaxMembers   int // members of one claim; also survivors in a Release
	MaxRecord    int // bytes of one encoded claim (members excluded)
}

// DefaultLimits are the limits applied where Options leaves them zero.
var DefaultLimits = Limits{
	MaxString:    4096,
	MaxArgs:      1024,
	MaxArgvBytes: 32 << 10,
	MaxMembers:   4096,
	MaxRecord:    64 << 10,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxString > 0 {
		d.MaxString = l.MaxString
	}
	if l.MaxArgs > 0 {
		d.MaxArgs = l.MaxArgs
	}
	if l.MaxArgvBytes > 0 {
		d.MaxArgvBytes = l.MaxArgvBytes
	}
	if l.MaxMembers > 0 {
		d.MaxMembers = l.MaxMembers
	}
	if l.MaxRecord > 0 {
		d.MaxRecord = l.MaxRecord
	}
	return d
}

func (l Limits) checkString(field, s string) error {
	if len(s) > l.MaxString {
		return fmt.Errorf("%s of %d bytes (limit %d): %w", field, len(s), l.MaxString, ErrTooLarge)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8: %w", field, ErrInvalid)
	}
	return nil
}

func validResult(field string, r verdict.Result) error {
	if r != 0 && r.String() == "INVALID" {
		return fmt.Errorf("%s: unknown verdict %d: %w", field, r, ErrInvalid)
	}
	return nil
}

// check validates c for writing, members included.
func (l Limits) check(c *Claim) error {
	if !c.Kind.valid() {
		return fmt.Errorf("kind %q: %w", c.Kind, ErrInvalid)
	}
	if !ValidID(c.Kind, c.ID) {
		return fmt.Errorf("id %q is not a %s id: %w", c.ID, c.Kind, ErrInvalid)
	}
	if !c.State.valid() {
		return fmt.Errorf("state %q: %w", c.State, ErrInvalid)
	}
	if c.Pid < 0 || c.Pgid < 0 {
		return fmt.Errorf("negative pid or pgid: %w", ErrInvalid)
	}
	for _, f := range [...]struct{ name, v string }{
		{"owner", c.Owner}, {"cwd", c.Cwd}, {"cgroup", c.Cgroup},
		{"output path", c.OutputPath}, {"retired reason", c.RetiredReason},
	} {
		if err := l.checkString(f.name, f.v); err != nil {
			return err
		}
	}
	if len(c.Argv) > l.MaxArgs {
		return fmt.Errorf("argv of %d entries (limit %d): %w", len(c.Argv), l.MaxArgs, ErrTooLarge)
	}
	total := 0
	for i, a := range c.Argv {
		if err := l.checkString(fmt.Sprintf("argv[%d]", i), a); err != nil {
			return err
		}
		total += len(a)
	}
	if total > l.MaxArgvBytes {
		return fmt.Errorf("argv of %d bytes (limit %d): %w", total, l.MaxArgvBytes, ErrTooLarge)
	}
	if v := c.LastVerdict; v != nil {
		if err := validResult("last verdict", v.Result); err != nil {
			return err
		}
		if err := l.checkString("verdict reason", v.Reason); err != nil {
			return err
		}
		if err := l.checkString("verdict mechanism", v.Mechanism); err != nil {
			return err
		}
	}
	if r := c.Release; r != nil {
		if err := validResult("release ownership", r.Ownership); err != nil {
			return err
		}
		if err := l.checkString("release cause", r.Cause); err != nil {
			return err
		}
		if len(r.Survivors) > l.MaxMembers {
			return fmt.Errorf("%d survivors (limit %d): %w", len(r.Survivors), l.MaxMembers, ErrTooLarge)
		}
		if len(r.Unproven) > l.MaxMembers {
			return fmt.Errorf("%d unproven (limit %d): %w", len(r.Unproven), l.MaxMembers, ErrTooLarge)
		}
		for _, s := range append(r.Survivors[:len(r.Survivors):len(r.Survivors)], r.Unproven...) {
			if err := l.checkString("survivor reason", s.Reason); err != nil {
				return err
			}
		}
	}
	if h := c.Holder; h != nil && (h.Pid <= 0 || h.Token.IsZero()) {
		return fmt.Errorf("holder %d without a token: %w", h.Pid, ErrInvalid)
	}
	if c.Pid > 0 && c.Token.IsZero() {
		return fmt.Errorf("root %d without a token: %w", c.Pid, ErrInvalid)
	}
	if len(c.Limits) > 16 {
		return fmt.Errorf("%d resource limits (at most 16): %w", len(c.Limits), ErrInvalid)
	}
	for _, lim := range c.Limits {
		if err := l.checkString("limit name", lim.Name); err != nil {
			return err
		}
	}
	if c.WallClock < 0 {
		return fmt.Errorf("negative wall clock: %w", ErrInvalid)
	}
	if c.Grace < 0 {
		return fmt.Errorf("negative grace: %w", ErrInvalid)
	}
	if len(c.Members) > l.MaxMembers {
		return fmt.Errorf("%d members (limit %d): %w", len(c.Members), l.MaxMembers, ErrTooLarge)
	}
	for _, m := range c.Members {
		if err := l.checkMember(m); err != nil {
			return err
		}
	}
	return nil
}

func (l Limits) checkMember(m Member) error {
	if m.Pid <= 0 || m.Parent < 0 {
		return fmt.Errorf("member pid %d, parent %d: %w", m.Pid, m.Parent, ErrInvalid)
	}
	if m.Token.IsZero() {
		return fmt.Errorf("member %d without a token: %w", m.Pid, ErrInvalid)
	}
	return nil
}

func sameMember(a, b Member) bool {
	return a.Pid == b.Pid && a.Token == b.Token && a.Parent == b.Parent &&
		a.ParentToken == b.ParentToken && a.BornAt.Equal(b.BornAt)
}

// Filter selects claims for List. Zero fields match everything.
type Filter struct {
	Kind  Kind
	State State
	// UID, when not nil, matches the creator's uid.
	UID *uint32
}

func (f Filter) match(c *Claim) bool {
	return (f.Kind == "" || c.Kind == f.Kind) &&
		(f.State == "" || c.State == f.State) &&
		(f.UID == nil || c.UID == *f.UID)
}
