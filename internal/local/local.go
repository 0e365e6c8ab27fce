// Package local is the command line's path when no daemon answers (or one
// is not asked): one token read, one judge and one teardown on this host,
// acting with the caller's own rights. It builds the same judge and the
// same teardown the daemon does (tracker.NewJudge, actions.New), so a
// question asked here gets the daemon's answer.
//
// On Linux a verdict binds a pidfd and a teardown watches the kernel's
// events while it runs. On macOS internal/xnu judges by the kernel's
// uniqueid and signals through an audit token built from the reply that
// judged the instance (proc_signal_with_audittoken, macOS 14.4+; below
// that nothing is signalled, and the outcome says why). Elsewhere one look
// at the process table judges, by the polling rules of internal/fallback,
// and nothing is ever signalled: nothing can bind a signal to the judged
// process.
// A teardown here never signals pid 1, this process, the running daemon
// (Options.Protected) or their ancestors.
package local

import "errors"

// Errors callers tell apart (the CLI maps them to exit codes). A
// mechanism that names nothing wraps tracker.ErrUnknownMechanism.
var (
	// ErrNoProcess: no live process holds the pid.
	ErrNoProcess = errors.New("no such process")
	// ErrNotProcess: the id is a thread's, not a process's.
	ErrNotProcess = errors.New("not a process id")
	// ErrUnavailable: what was asked cannot run on this host.
	ErrUnavailable = errors.New("not available on this system")
)

// marked is an error that reads as err and is also kind (errors.Is).
type marked struct{ kind, err error }

func (m marked) Error() string   { return m.err.Error() }
func (m marked) Unwrap() []error { return []error{m.kind, m.err} }
func mark(kind, err error) error { return marked{kind, err} }
