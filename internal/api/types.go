// Package api is the supervisor daemon's local API: HTTP+JSON on a Unix
// socket, with versioned paths (/v1/...). The server authorises each request
// by the peer credentials of its connection (SO_PEERCRED, read once when the
// connection is accepted), never by anything the request says about itself:
// root acts on every claim, another uid only on claims it created. The
// peer's pid namespace and root directory are read once too, through its
// pidfd (SO_PEERPIDFD), before its first request is served, by a reader
// of its uid's off the accept loop: a peer in another pid namespace than
// the daemon's names and would be shown pids that are not its own, so it
// is answered status alone.
//
// The server defends itself: request bodies are capped (http.MaxBytesReader),
// every field is bounded, unknown fields and keys given twice are refused, a panic in a handler
// answers 500 instead of ending the daemon. Errors are 4xx or 5xx with a
// JSON body {"error": "..."}.
//
// It shares itself fairly between uids (Limits, DefaultLimits). Every
// connection is accepted at once and its uid read (SO_PEERCRED); a
// non-root uid is served on at most 16 connections, all of them together
// on 256, and root on 64 of its own that no other uid can take. A
// connection over its cap waits for a slot of its own uid (5 s; root 1 min)
// and is then answered 503 with a JSON error; while as many wait already, it
// is answered 503 at once, and while as many wait for that answer, closed.
// An idle keep-alive connection is closed after 10 s. A non-root uid makes
// at most 100 requests a second over time, 200 at once (429 beyond, with
// Retry-After). Long-lived requests (release and kill, which wait out a
// grace period) are capped at 4 a uid (429) and may answer for up to
// MaxGrace longer than the 2 minutes of a short one. So one uid makes
// another wait at most ConnWait, for a shared slot.
//
// The Client speaks the same types; cmd/supervisor uses it, and anything that
// can speak HTTP on a Unix socket (curl --unix-socket) can too.
//
// Limits: SO_PEERCRED names the process that connected, at connect time. A
// client that passes its connection to another process lends it its identity;
// that is the usual Unix socket contract. A peer that has exited by the
// time it is accepted counts as in another pid namespace (nothing read of
// it can be confirmed). Before Linux 6.5 (no SO_PEERPIDFD) the peer's pid
// is opened when it is accepted, and a peer that exited and whose pid was
// reissued by then is judged by the new process's namespace.
package api

import (
	"fmt"
	"slices"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Version is the path prefix of this API.
const Version = "/v1"

// APIHeader is on every answer of this daemon, with the API version ("v1")
// as its value: the handshake by which a client tells this daemon from
// another server on the same path (supervisord's socket answers HTTP too).
const APIHeader = "Supervisor-API"

// Bounds on requests. The store has its own (store.Limits); these keep a
// request from costing the daemon more than a bounded amount before that.
const (
	MaxBodyBytes = 256 << 10
	MaxArgs      = 1024
	MaxArgvBytes = 32 << 10
	MaxEnv       = 1024
	MaxEnvBytes  = 64 << 10
	MaxString    = 4096
	MaxOwner     = 256
	MaxWallClock = 365 * 24 * time.Hour
	MaxGrace     = time.Hour
	// MaxOutputRead bounds one read of a job's output: what the daemon
	// holds for an answer its client does not read (it was 1 MiB: three
	// users' 16 connections each, never read, grew the daemon by 50 MB),
	// as a page of claims.
	MaxOutputRead = 256 << 10
	// MaxTreeNodes bounds the nodes of one tree answer (the process and
	// its descendants), and MaxTreeArgs the command-line bytes it
	// carries: past them descendants are left out (counted in the first
	// node's DescendantsCut), and command lines not read.
	MaxTreeNodes = 2048
	MaxTreeArgs  = 512 << 10
)

// OutputSizeHeader is the header of an output answer that carries the
// output file's total size, in bytes, when it was read.
const OutputSizeHeader = "Supervisor-Output-Size"

// OutputOffsetHeader carries Output.Offset; absent, the offset asked.
const OutputOffsetHeader = "Supervisor-Output-Offset"

// Duration is a time.Duration that travels as Go duration text ("1m30s")
// both ways: in requests, in answers, in the daemon's config file, and on
// its command line (it is a flag.Value). Negative durations are refused.
type Duration time.Duration

// maxDurationText bounds the text a Duration is parsed from.
const maxDurationText = 64

// String returns the duration as Go duration text.
func (d Duration) String() string { return time.Duration(d).String() }

// Set implements flag.Value: it parses s as UnmarshalText does.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) > maxDurationText {
		return fmt.Errorf("duration of %d bytes, limit %d", len(b), maxDurationText)
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("negative duration %s", b)
	}
	*d = Duration(v)
	return nil
}

// LaunchRequest asks the daemon to start a process.
type LaunchRequest struct {
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd,omitempty"`
	// Env is the environment, KEY=VALUE; empty means a minimal PATH only.
	Env   []string `json:"env,omitempty"`
	Owner string   `json:"owner,omitempty"`
	// Detach makes a job (survives everything, output kept) instead of a
	// grant (a contained tree).
	Detach bool `json:"detach,omitempty"`
	// WallClock is the grant's limit, or the job's maximum runtime.
	WallClock Duration `json:"wall_clock,omitempty"`
	// Bind binds the grant to the calling process (the peer of the
	// connection), unless Holder names another process.
	Bind bool `json:"bind,omitempty"`
	// Holder, with Bind, names the holder explicitly (the CLI names its
	// own parent). It must verify now and belong to the caller's uid.
	Holder *Instance `json:"holder,omitempty"`
	// NoNewPrivs sets no_new_privs on the workload: no setuid program it
	// runs gains privileges.
	NoNewPrivs bool `json:"no_new_privs,omitempty"`
	// UID and GID run the process as another user; only root may ask. A
	// UID without a GID takes the user's groups from the user database.
	UID *uint32 `json:"uid,omitempty"`
	GID *uint32 `json:"gid,omitempty"`
}

// AdmitRequest registers an existing process as a grant root.
type AdmitRequest struct {
	Pid   int32       `json:"pid"`
	Token token.Token `json:"token"`
	Owner string      `json:"owner,omitempty"`
}

// ReleaseRequest tunes a release.
type ReleaseRequest struct {
	Grace *Duration `json:"grace,omitempty"`
}

// ListQuery selects a page of claims: those after the cursor After (a
// claim id; claims come in id order), at most Limit (MaxListLimit when 0),
// filtered by owner, state and uid (another uid's claims only for root).
type ListQuery struct {
	After string
	Limit int
	Owner string
	State string
	UID   *uint32
}

// MaxListLimit bounds a page of claims.
const MaxListLimit = 1000

// NextCursorHeader carries the cursor of the next page of claims; absent
// on the last page.
const NextCursorHeader = "Supervisor-Next-Cursor"

// ReapRequest runs the reaper once.
type ReapRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// ClaimRequest names a process instance (verify, kill).
type ClaimRequest struct {
	Pid   int32       `json:"pid"`
	Token token.Token `json:"token"`
	Grace *Duration   `json:"grace,omitempty"`
}

// Claim is a grant or a job as the API shows it. It is its own type, not
// the store's record: ClaimOf converts at the edge, so that a change of how
// the store keeps a claim does not change the wire, and no storage detail
// (a duration in nanoseconds, a write counter) reaches a client.
type Claim struct {
	// ID is "g-" (grant) or "j-" (job) and 12 base32 characters.
	ID    string     `json:"id"`
	Kind  store.Kind `json:"kind"`
	Owner string     `json:"owner,omitempty"`
	// UID and GID of the client that created the claim.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Argv is the command, with what the daemon's redaction patterns
	// match replaced; ArgsRedacted says that an argument is a marker
	// (redact.Marker) standing in for what they hid.
	Argv         []string `json:"argv,omitempty"`
	ArgsRedacted bool     `json:"args_redacted,omitempty"`
	Cwd          string   `json:"cwd,omitempty"`
	// Pid and Token name the root instance; Pid 0 means not started.
	Pid   int32       `json:"pid"`
	Token token.Token `json:"token,omitzero"`
	Pgid  int32       `json:"pgid,omitempty"`
	// Cgroup is the path of the claim's own cgroup, if it has one.
	Cgroup    string      `json:"cgroup,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	State     store.State `json:"state"`

	LastVerdict *Judgement `json:"last_verdict,omitempty"`
	Release     *Release   `json:"release,omitempty"`
	// Holder is the process a grant is bound to; nil when unbound.
	Holder *Instance `json:"holder,omitempty"`
	// WallClock is the limit given at launch (0: none); Deadline is when
	// it runs out.
	WallClock Duration  `json:"wall_clock,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// Limits are the resource limits the workload got lower than the
	// daemon's own, from its caller's.
	Limits []Limit `json:"limits,omitempty"`
	// NoNewPrivs is set when the workload was started with no_new_privs:
	// asked for, or inherited from a caller that had it or a narrower
	// capability bounding set than the daemon's.
	NoNewPrivs bool `json:"no_new_privs,omitempty"`
	// Started is what the workload had just after its exec (its umask,
	// nice value, scheduling policy, I/O priority, oom_score_adj, CPUs and
	// seccomp filters), as the daemon read it; nil when it had ended.
	Started *StartEnv `json:"started,omitempty"`
	// GraceUntil, while a teardown is in progress (releasing), is when
	// its grace period ends.
	GraceUntil time.Time `json:"grace_until,omitzero"`

	// A job's result: ExitCode or ExitSignal once it ended, its output
	// file, why it was retired; FollowedUp once its caller (the uid that
	// launched it) picked it up.
	ExitCode      *int      `json:"exit_code,omitempty"`
	ExitSignal    int       `json:"exit_signal,omitempty"`
	EndedAt       time.Time `json:"ended_at,omitzero"`
	OutputPath    string    `json:"output_path,omitempty"`
	RetiredReason string    `json:"retired_reason,omitempty"`
	FollowedUp    bool      `json:"followed_up,omitempty"`

	// UpdatedAt is when the claim last changed.
	UpdatedAt time.Time `json:"updated_at"`
	// Members are the descendants of the root the daemon saw born.
	Members []Member `json:"members,omitempty"`
}

// StartEnv is what a workload had just after its exec.
type StartEnv = store.StartEnv

// Limit is one resource limit of a workload, by name (nofile, nproc,
// memlock, core ...); 18446744073709551615 is unlimited.
type Limit = store.Limit

// Judgement is the last verdict on a claim's root.
type Judgement struct {
	Result    verdict.Result `json:"verdict,omitzero"`
	Reason    string         `json:"reason,omitempty"`
	Mechanism string         `json:"mechanism,omitempty"`
	At        time.Time      `json:"at,omitzero"`
}

// Release says how a claim's tree was let go.
type Release struct {
	// Dead: no member of the tree was left alive.
	Dead bool `json:"dead"`
	// Escalated: SIGKILL was needed after the grace period.
	Escalated bool `json:"escalated,omitempty"`
	// Survivors are members still alive after teardown; Unproven are
	// processes reported, never signalled, each with the reason.
	Survivors []Instance `json:"survivors,omitempty"`
	Unproven  []Instance `json:"unproven,omitempty"`
	// SurvivorsTotal and UnprovenTotal count the whole lists when the
	// record kept only their start (0: the list is whole).
	SurvivorsTotal int `json:"survivors_total,omitempty"`
	UnprovenTotal  int `json:"unproven_total,omitempty"`
	// Ownership is the verdict on the root that decided the release.
	Ownership verdict.Result `json:"ownership,omitzero"`
	At        time.Time      `json:"at,omitzero"`
	// Cause is why the claim was let go: "requested", "wall clock",
	// "holder gone", "root exited" ("" in records older than it).
	Cause string `json:"cause,omitempty"`
	// Incomplete says why the members found may not have been the whole
	// tree: a member the lineage did not watch without a gap from its
	// birth could have left a child it does not know of.
	Incomplete string `json:"incomplete,omitempty"`
}

// Member is a descendant of a claim's root that the daemon saw born.
type Member struct {
	Pid         int32       `json:"pid"`
	Token       token.Token `json:"token"`
	Parent      int32       `json:"parent"`
	ParentToken token.Token `json:"parent_token,omitzero"`
	BornAt      time.Time   `json:"born_at,omitzero"`
}

// ClaimOf converts a stored claim, members included, to its wire form.
// The result shares no memory with c.
func ClaimOf(c store.Claim) Claim {
	w := Claim{
		ID: c.ID, Kind: c.Kind, Owner: c.Owner, UID: c.UID, GID: c.GID,
		Argv: slices.Clone(c.Argv), ArgsRedacted: slices.ContainsFunc(c.Argv, redact.Hides), Cwd: c.Cwd,
		Pid: c.Pid, Token: c.Token, Pgid: c.Pgid, Cgroup: c.Cgroup,
		CreatedAt: c.CreatedAt, State: c.State,
		WallClock: Duration(c.WallClock), Deadline: c.Deadline,
		ExitSignal: c.ExitSignal, EndedAt: c.EndedAt, OutputPath: c.OutputPath,
		RetiredReason: c.RetiredReason, FollowedUp: c.FollowedUp,
		UpdatedAt: c.UpdatedAt, Limits: slices.Clone(c.Limits), NoNewPrivs: c.NoNewPrivs, GraceUntil: c.GraceUntil,
	}
	if s := c.Started; s != nil {
		env := *s
		w.Started = &env
	}
	if v := c.LastVerdict; v != nil {
		w.LastVerdict = &Judgement{Result: v.Result, Reason: v.Reason, Mechanism: v.Mechanism, At: v.At}
	}
	if r := c.Release; r != nil {
		w.Release = &Release{
			Dead: r.Dead, Escalated: r.Escalated, Ownership: r.Ownership, At: r.At, Cause: r.Cause, Incomplete: r.Incomplete,
			Survivors: slices.Clone(r.Survivors), Unproven: slices.Clone(r.Unproven),
			SurvivorsTotal: r.SurvivorsTotal, UnprovenTotal: r.UnprovenTotal,
		}
	}
	if c.Holder != nil {
		h := *c.Holder
		w.Holder = &h
	}
	if c.ExitCode != nil {
		code := *c.ExitCode
		w.ExitCode = &code
	}
	if len(c.Members) > 0 {
		w.Members = make([]Member, len(c.Members))
		for i, m := range c.Members {
			w.Members[i] = Member{Pid: m.Pid, Token: m.Token, Parent: m.Parent, ParentToken: m.ParentToken, BornAt: m.BornAt}
		}
	}
	return w
}

// ReleaseResponse is a released claim and the teardown that released it.
type ReleaseResponse struct {
	Claim   Claim            `json:"claim"`
	Outcome *actions.Outcome `json:"outcome,omitempty"`
}

// Report counts what a reconcile or a reaper pass found and did.
type Report struct {
	Seen         int  `json:"seen"`
	Readopted    int  `json:"readopted"`
	TornDown     int  `json:"torn_down"`
	Foreign      int  `json:"foreign"`
	Unverifiable int  `json:"unverifiable"`
	AlreadyGone  int  `json:"already_gone"`
	Failed       int  `json:"failed"`
	DryRun       bool `json:"dry_run,omitempty"`
	// Mechanism is the event mechanism the verdicts were judged with.
	Mechanism string       `json:"mechanism,omitempty"`
	Items     []ReportItem `json:"items,omitempty"`
}

// ReportItem is what happened to one claim.
type ReportItem struct {
	ID       string           `json:"id"`
	Kind     store.Kind       `json:"kind"`
	Orphan   bool             `json:"orphan,omitempty"`
	Verdict  verdict.Result   `json:"verdict,omitzero"`
	Action   string           `json:"action"`
	Reason   string           `json:"reason,omitempty"`
	Members  int              `json:"members,omitempty"`
	Unproven []actions.Member `json:"unproven,omitempty"`
	// Failed: a teardown left survivors; the claim stays open.
	Failed bool `json:"failed,omitempty"`
}

// Status describes the running daemon. A caller other than root is
// told of the claims that count against its own quotas only: Counts,
// Claims, Members, StoreBytes and Reconcile are theirs, and
// MembersQueued, HoldersWatched and HoldersUnwatched, which only the
// whole daemon has, are 0.
type Status struct {
	Version       string                             `json:"version"`
	Pid           int                                `json:"pid"`
	Mechanism     string                             `json:"mechanism"`
	Tried         []string                           `json:"mechanisms_tried,omitempty"`
	StartedAt     time.Time                          `json:"started_at"`
	UptimeSeconds float64                            `json:"uptime_seconds"`
	Counts        map[store.Kind]map[store.State]int `json:"counts"`
	Claims        int                                `json:"claims"`
	Members       int                                `json:"members"`
	LostEvents    uint64                             `json:"lost_events"`
	Events        uint64                             `json:"events"`
	Resyncs       uint64                             `json:"resyncs"`
	GraphLive     int                                `json:"graph_live"`
	MembersQueued uint64                             `json:"members_recorded"`
	MembersLost   uint64                             `json:"members_dropped"`
	Cgroup        string                             `json:"cgroup,omitempty"`
	CgroupReason  string                             `json:"cgroup_reason,omitempty"`
	Reconcile     Report                             `json:"reconcile"`
	LogDropped    uint64                             `json:"log_lines_dropped"`
	// LogWithheld counts process lines written without their arguments,
	// their user over its share of the feed (log_user_bytes).
	LogWithheld uint64 `json:"log_args_withheld,omitempty"`
	// LastLogError is the log feed's last output error ("" when none).
	LastLogError string `json:"last_log_error,omitempty"`
	StoreBytes   int64  `json:"store_bytes"`
	// PollFailures counts failed polls of a polling mechanism (each one a
	// gap in continuity); LastPollError says why the latest failed.
	PollFailures  uint64 `json:"poll_failures,omitempty"`
	LastPollError string `json:"last_poll_error,omitempty"`
	// HoldersWatched counts holder processes whose pidfd the daemon
	// watches (one descriptor each); HoldersUnwatched those it could not
	// watch (no descriptor left), left to exit events and the reaper.
	HoldersWatched   int    `json:"holders_watched"`
	HoldersUnwatched uint64 `json:"holders_unwatched,omitempty"`
	// StoreErrors counts store operations that failed since the start;
	// LastStoreError is the latest.
	StoreErrors    uint64 `json:"store_errors"`
	LastStoreError string `json:"last_store_error,omitempty"`
}

// TreeNode is one process of a tree: the lineage graph's own shape, so the
// daemon's answer and the CLI's local tree are the same. The daemon answers
// a flat list (no Children); lineage.Arrange builds the tree.
type TreeNode = lineage.TreeNode

// Output is one read of a job's output file (its stdout and stderr): the
// bytes from the offset asked, at most MaxOutputRead, and the file's size
// when it was read. On the wire it is the bytes themselves
// (application/octet-stream), with the size in OutputSizeHeader.
type Output struct {
	Data []byte
	Size int64
	// Offset is where Data starts: the offset asked, or a later one when
	// the bytes before it were dropped (the daemon keeps the last
	// job_output_max bytes of a job's output). On the wire it is in
	// OutputOffsetHeader.
	Offset int64
}

// Instance is one process instance: a pid and its start token.
type Instance = store.Instance
