// Package api is the supervisor daemon's local API: HTTP+JSON on a Unix
// socket, with versioned paths (/v1/...). The server authorises each request
// by the peer credentials of its connection (SO_PEERCRED, read once when the
// connection is accepted), never by anything the request says about itself:
// root acts on every claim, another uid only on claims it created.
//
// The server defends itself: request bodies are capped (http.MaxBytesReader),
// every field is bounded, unknown fields are refused, a panic in a handler
// answers 500 instead of ending the daemon, connections are capped and time
// out. Errors are 4xx or 5xx with a JSON body {"error": "..."}.
//
// The Client speaks the same types; cmd/supervisor uses it, and anything that
// can speak HTTP on a Unix socket (curl --unix-socket) can too.
//
// Limits: SO_PEERCRED names the process that connected, at connect time. A
// client that passes its connection to another process lends it its identity;
// that is the usual Unix socket contract.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Version is the path prefix of this API.
const Version = "/v1"

// Bounds on requests. The store has its own (store.Limits); these keep a
// request from costing the daemon more than a bounded amount before that.
const (
	MaxBodyBytes   = 256 << 10
	MaxArgs        = 1024
	MaxArgvBytes   = 32 << 10
	MaxEnv         = 1024
	MaxEnvBytes    = 64 << 10
	MaxString      = 4096
	MaxOwner       = 256
	MaxWallClock   = 365 * 24 * time.Hour
	MaxGrace       = time.Hour
	MaxConnections = 64
)

// Duration is a time.Duration that travels as Go duration text ("1m30s").
// Negative durations are refused when decoding.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) > 64 {
		return errors.New("duration too long")
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
	// UID and GID run the process as another user; only root may ask.
	UID *uint32 `json:"uid,omitempty"`
	GID *uint32 `json:"gid,omitempty"`
}

// AdmitRequest registers an existing process as a grant root.
type AdmitRequest struct {
	Pid   int32  `json:"pid"`
	Token string `json:"token"`
	Owner string `json:"owner,omitempty"`
}

// ReleaseRequest tunes a release.
type ReleaseRequest struct {
	Grace *Duration `json:"grace,omitempty"`
}

// ReapRequest runs the reaper once.
type ReapRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// ClaimRequest names a process instance (verify, kill).
type ClaimRequest struct {
	Pid   int32     `json:"pid"`
	Token string    `json:"token"`
	Grace *Duration `json:"grace,omitempty"`
}

// Claim is a stored claim with its members.
type Claim struct {
	store.Claim
	Members []store.Member `json:"members,omitempty"`
}

// ReleaseResponse is a released claim and the teardown that released it.
type ReleaseResponse struct {
	Claim   Claim            `json:"claim"`
	Outcome *actions.Outcome `json:"outcome,omitempty"`
}

// Report counts what a reconcile or a reaper pass found and did.
type Report struct {
	Seen         int          `json:"seen"`
	Readopted    int          `json:"readopted"`
	TornDown     int          `json:"torn_down"`
	Foreign      int          `json:"foreign"`
	Unverifiable int          `json:"unverifiable"`
	AlreadyGone  int          `json:"already_gone"`
	Failed       int          `json:"failed"`
	DryRun       bool         `json:"dry_run,omitempty"`
	Items        []ReportItem `json:"items,omitempty"`
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

// Status describes the running daemon.
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
	StoreBytes    int64                              `json:"store_bytes"`
	// StoreErrors counts store operations that failed since the start;
	// LastStoreError is the latest.
	StoreErrors    uint64 `json:"store_errors"`
	LastStoreError string `json:"last_store_error,omitempty"`
}

// TreeNode is one process of a tree.
type TreeNode struct {
	Pid    int32  `json:"pid"`
	Token  string `json:"token"`
	PPid   int32  `json:"ppid"`
	Comm   string `json:"comm"`
	Root   string `json:"root,omitempty"`
	Born   bool   `json:"born_observed"`
	Exited bool   `json:"exited,omitempty"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

// Error is an error the daemon answered.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("daemon: %s (HTTP %d)", e.Message, e.Status) }

// decodeStrict decodes exactly one JSON value with unknown fields refused.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Instance is one process instance: a pid and its start token.
type Instance = store.Instance
