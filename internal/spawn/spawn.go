// Package spawn starts a workload for the daemon as its caller would have:
// the caller's uid, groups and resource limits, a session of its own with
// no controlling terminal, descriptors 0, 1 and 2 only.
//
// The mechanism: the daemon forks its own binary (/proc/self/exe, named
// "supervisor-spawn" in argv[0]) with the workload's credentials, its own
// session and, where given, its cgroup (CLONE_INTO_CGROUP), exactly as it
// would fork the workload. That shim, already running with the workload's
// rights, reads its Spec from descriptor 3, lowers its resource limits,
// sets no_new_privs if asked, closes every descriptor above 2 but its
// status pipe, resolves argv[0] on the workload's PATH with its own rights
// (so a name found only where the caller cannot look is not found, and an
// error says nothing the caller could not learn), and execs the workload
// in place: same pid, same start time, same pidfs inode, so the token read
// from the fork's pidfd names the workload. An exec that fails writes its
// reason on the status pipe (close-on-exec: a successful exec closes it
// empty), and the daemon reports it as a failed exec.
//
// Limits: the shim is a Go program, so the fork-to-exec window is a Go
// start (a few milliseconds). A resource limit can only be lowered, never
// raised beyond the daemon's own (root here cannot raise a hard limit).
package spawn

import (
	"errors"
	"fmt"
)

// ShimName is argv[0] of the shim; Main recognises it.
const ShimName = "supervisor-spawn"

// Limit is one resource limit applied to the workload.
type Limit struct {
	Resource int    `json:"resource"`
	Soft     uint64 `json:"soft"`
	Hard     uint64 `json:"hard"`
}

// Spec is what the shim does before it becomes the workload.
type Spec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Path is the search path for argv[0] when it has no slash.
	Path       string  `json:"path"`
	Limits     []Limit `json:"limits,omitempty"`
	NoNewPrivs bool    `json:"no_new_privs,omitempty"`
}

// ErrExec wraps the reason the workload could not be executed (not
// found, permission denied, not an executable).
var ErrExec = errors.New("exec failed")

// ExecError is an exec that failed in the shim.
type ExecError struct{ Reason string }

func (e *ExecError) Error() string { return fmt.Sprintf("%v: %s", ErrExec, e.Reason) }
func (e *ExecError) Unwrap() error { return ErrExec }
