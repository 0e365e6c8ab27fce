// Package spawn starts a workload for the daemon as its caller would have:
// the caller's uid, groups, resource limits, umask, audit login uid and CPU
// affinity, its nice value, scheduling policy, I/O priority and
// oom_score_adj (never more favourable than the daemon's, and never a
// realtime policy or I/O class), a session of its own with
// no controlling terminal, a session keyring of its own (never the
// daemon's), descriptors 0, 1 and 2 only, and none of what exec would
// keep of the daemon's: capabilities and securebits (for a workload of
// another uid than root's: one that stays uid 0 keeps root's
// capabilities), blocked or ignored signals, personality.
//
// The mechanism: the daemon forks its own binary (/proc/self/exe, named
// "supervisor-spawn" in argv[0]) as root, in its own session and, where
// given, its cgroup (CLONE_INTO_CGROUP), exactly as it would fork the
// workload. That shim reads its Spec from descriptor 3, lowers its
// resource limits, takes the caller's audit login uid, oom_score_adj,
// scheduling, I/O priority, affinity and coredump_filter (above), reads
// the caller's seccomp filters, joins the caller's
// namespaces the daemon holds open for
// it (setns: the workload then keeps them alive, so a sandbox's mounts
// stay in place after the sandbox's last process has gone), joins a new
// anonymous session keyring (made while root's: root's key quota pays for
// it, and only the workload and its descendants possess it), resets the
// personality and what else exec keeps (below), then takes the workload's
// groups, gid and uid, enters
// the working directory with them (securebits cleared first, and the
// capability sets confirmed empty after; in the caller's root directory, when
// the daemon gives one: the shim chroots into it while it is still root),
// sets no_new_privs if asked and the caller's umask, empties its signal
// mask, gives ignored signals their default action, attaches the caller's
// seccomp filters (with no_new_privs), closes
// every descriptor above 2 but its status pipe, resolves argv[0] on the
// workload's PATH with the workload's rights (so a name found only where
// the caller cannot look is not found, and an error says nothing the
// caller could not learn), and execs the workload in place: same pid,
// same start time, same pidfs inode, so the token read from the fork's
// pidfd names the workload. An exec that fails writes its reason on the
// status pipe (close-on-exec: a successful exec closes it empty), and the
// daemon reports it as a failed exec.
//
// The order is the point. Until it takes the workload's uid the shim is
// root's, so the caller can neither trace nor signal it; the kernel makes a
// process that changed its uid undumpable, so the caller cannot trace it
// after either, until the exec of a program it may read. The limits are set
// while it is root and cannot be undone by the caller (a shim forked with
// the caller's uid from the start could be traced by the caller, whose
// tracer skipped its setrlimit calls: the workload ran with the daemon's
// limits). And the caller's RLIMIT_NPROC holds: set before the uid
// changes, the kernel marks a uid already at its limit, and the exec fails
// with EAGAIN, as the caller's own fork would have.
//
// Limits: the shim is a Go program, so the fork-to-exec window is a Go
// start (a few milliseconds). A resource limit can only be lowered, never
// raised beyond the daemon's own (root here cannot raise a hard limit).
// Without CAP_SYS_RESOURCE (the packaged unit has none), raising the
// workload's oom_score_adj leaves the floor it has from the daemon
// (oom_score_adj_min), so the workload may lower its own back to the
// daemon's value. A caller's realtime policy or I/O class is not carried:
// the workload runs at SCHED_OTHER and the class none, and a caller
// allowed more sets it in its command (chrt, ionice). The workload has
// the kernel's default time slice, not a custom one of either's; where
// the kernel has utilization clamps, it keeps the daemon's. Its timer
// slack, memory policy, transparent-huge-page and KSM settings, and on x86
// its time-stamp counter and machine-check policies, are the kernel's
// defaults, and its coredump_filter the caller's. Kept from the daemon,
// where it has them: its seccomp filter and memory-deny-write-execute
// (neither can be undone). The caller's seccomp filters are the workload's
// (internal/seccomp: read by the shim as the caller's tracer, attached
// last, once the shim is the user's alone: a filter is the caller's to
// write, and one that answered for setresuid while the shim was root's
// kept the workload root's).
// Not carried from the caller: its Landlock domain and LSM label, which no
// process can take from another.
package spawn

import (
	"errors"
	"fmt"
)

// ShimName is argv[0] of the shim; Main recognises it.
const ShimName = "supervisor-spawn"

// shimComm is the shim's name (its main thread's comm) from its start to
// the workload's exec. No exec can give a process a name with a '/' (the
// kernel takes the last element of the path), so a launch process that
// ended under this name never ran its workload: see BeforeExec.
const shimComm = "spawn/shim"

// BeforeExec reports whether comm, the name of a launch process that has
// exited (read from its zombie's /proc/PID/stat), says that it ended in
// the shim, before the workload's exec: killed there (by the caller's
// seccomp filters at execve, by its user, by the OOM killer). The status
// pipe cannot tell: its end comes with the exec and with the exit alike.
// False when the shim could not name itself (no /proc): then nothing
// tells.
func BeforeExec(comm string) bool { return comm == shimComm }

// Limit is one resource limit applied to the workload.
type Limit struct {
	Resource int    `json:"resource"`
	Soft     uint64 `json:"soft"`
	Hard     uint64 `json:"hard"`
}

// Cred is who the shim becomes before it execs the workload.
type Cred struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups"`
}

// Spec is what the shim does before it becomes the workload.
type Spec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Path is the search path for argv[0] when it has no slash.
	Path       string  `json:"path"`
	Limits     []Limit `json:"limits,omitempty"`
	NoNewPrivs bool    `json:"no_new_privs,omitempty"`
	// Umask, when set, is the workload's file mode creation mask (its
	// caller's); unset, the workload keeps the daemon's.
	Umask *uint32 `json:"umask,omitempty"`
	// Nice, when set, is the caller's nice value. The shim takes it only
	// when it is higher (less favourable) than the one it has from the
	// daemon: an unprivileged caller could not have lowered its own, and
	// the shim never gives a workload a more favourable one than the
	// daemon's. Unset, the workload keeps the daemon's.
	Nice *int `json:"nice,omitempty"`
	// LoginUID, when set, is the caller's audit login uid, which the
	// shim gives itself (and so the workload) while it is root: the
	// daemon's, unset under systemd, let a job set its own to anyone's
	// (a process whose login uid is unset may set it once, unprivileged),
	// so its audit records named root where its caller's named the user.
	LoginUID *uint32 `json:"login_uid,omitempty"`
	// Policy, when set, is the caller's scheduling policy (SCHED_*).
	// The shim takes the less favourable of it and its own, and never a
	// realtime or deadline one: a daemon run under chrt gave every job
	// its realtime policy, ahead of every user's ordinary process. Unset,
	// it counts as SCHED_OTHER.
	Policy *int `json:"policy,omitempty"`
	// IOPrio, when set, is the caller's I/O priority (ioprio_get's
	// value). The shim takes it where it is less favourable than its own,
	// and never the realtime class: a daemon under ionice -c 1 gave every
	// job first claim on the disks. Unset, it counts as the class none
	// (from the nice value).
	IOPrio *int `json:"ioprio,omitempty"`
	// OOMScoreAdj, when set, is the caller's oom_score_adj. The shim
	// takes it where it is higher than its own (the daemon's): a daemon
	// its host protects from the OOM killer (-997 for a node-critical
	// pod) gave that to every job, whose memory then went before any
	// other process's. Unset, the workload keeps the daemon's.
	OOMScoreAdj *int `json:"oom_score_adj,omitempty"`
	// Affinity, when set, is the caller's CPU affinity mask (64 CPUs a
	// word), the workload's where its cgroup allows any of those CPUs;
	// unset, or allowing none, the workload keeps the daemon's.
	Affinity []uint64 `json:"affinity,omitempty"`
	// CoredumpFilter, when set, is the caller's coredump_filter, the
	// workload's in place of the daemon's.
	CoredumpFilter *uint32 `json:"coredump_filter,omitempty"`
	// Cred, when set, are taken after the limits (Start fills it from
	// Attr.Cred); Dir, when set, is entered after that, with them.
	Cred *Cred  `json:"cred,omitempty"`
	Dir  string `json:"dir,omitempty"`
	// Root, set by Start from Attr.Root, is the descriptor of the
	// directory the shim makes its root before it takes Cred.
	Root int `json:"root,omitempty"`
	// Namespaces, set by Start from Attr.Namespaces, are the descriptors
	// of the namespaces the shim joins, in order, before it enters Root.
	Namespaces []NamespaceFD `json:"namespaces,omitempty"`
	// SeccompFrom, when set, is the pid of the caller whose seccomp
	// filters the shim reads (while root, as its tracer) and attaches to
	// itself last, just before the exec, with no_new_privs: a workload
	// outside its caller's filters could make the calls they refuse (a
	// container's default profile: unshare of a user namespace, keyctl,
	// bpf). CallerFD, set by Start from Attr.Caller, is a pidfd of that
	// caller, found alive after the read: the filters read at the pid
	// were the caller's. Filters that cannot be read fail the launch.
	SeccompFrom int `json:"seccomp_from,omitempty"`
	CallerFD    int `json:"caller_fd,omitempty"`
}

// NamespaceFD is a namespace the shim joins: its descriptor and its
// CLONE_NEW* type, which setns checks against the descriptor.
type NamespaceFD struct {
	FD   int `json:"fd"`
	Type int `json:"type"`
}

// ErrExec wraps the reason the workload could not be executed (not
// found, permission denied, not an executable).
var ErrExec = errors.New("exec failed")

// ErrSetup wraps the reason the shim could not prepare the workload while
// it was root's (a resource limit, a namespace, the root directory, the
// credentials): the daemon's failure, not the caller's.
var ErrSetup = errors.New("cannot prepare the workload")

// SetupError is a failure of the shim before it took the workload's
// credentials.
type SetupError struct{ Reason string }

func (e *SetupError) Error() string { return fmt.Sprintf("%v: %s", ErrSetup, e.Reason) }
func (e *SetupError) Unwrap() error { return ErrSetup }

// ErrCaller wraps the reason the shim could not take from the caller what
// the workload must have of it (its seccomp filters): the caller's state
// (traced by another, gone, in a stop it cannot leave), not the daemon's.
var ErrCaller = errors.New("cannot take the caller's restrictions")

// CallerError is a failure of the shim to take what the workload must
// have of its caller.
type CallerError struct{ Reason string }

func (e *CallerError) Error() string { return fmt.Sprintf("%v: %s", ErrCaller, e.Reason) }
func (e *CallerError) Unwrap() error { return ErrCaller }

// ExecError is an exec that failed in the shim.
type ExecError struct{ Reason string }

func (e *ExecError) Error() string { return fmt.Sprintf("%v: %s", ErrExec, e.Reason) }
func (e *ExecError) Unwrap() error { return ErrExec }
