package xnu

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Errors callers tell apart.
var (
	// ErrNoProcess: no live process holds the pid, or the audit token
	// names no live instance (it exited, is a zombie, or exec'd) (ESRCH).
	ErrNoProcess = errors.New("no such process")
	// ErrNoTokenSignal: proc_signal_with_audittoken is absent (macOS
	// before 14.4) or this system is not macOS; nothing is signalled.
	ErrNoTokenSignal = errors.New("proc_signal_with_audittoken is not available (macOS 14.4 or later is needed)")
	// ErrPermission: the kernel refused (EPERM).
	ErrPermission = errors.New("operation not permitted")
)

// Ident is what one proc_pidinfo reply says of the instance at Pid.
type Ident struct {
	Pid       int32
	UniqueID  uint64 // p_uniqueid: new on every fork, kept across exec
	PUniqueID uint64 // p_puniqueid: the birth parent's uniqueid
	IDVersion int32  // p_idversion: changes on every fork and exec
	// StartMicro is the start time in µs since the epoch; 0 when it was
	// not read (flavor 17 only).
	StartMicro uint64
	// PPid and the uids are known when HasCreds (flavor 18).
	PPid             int32
	UID, RUID, SVUID uint32
	HasCreds         bool
}

// AuditToken returns the token that names exactly this instance, at this
// exec generation, for proc_signal_with_audittoken.
func (id Ident) AuditToken() AuditToken {
	var t AuditToken
	t[1], t[3] = id.UID, id.RUID // euid, ruid (informative; not checked)
	t[5] = uint32(id.Pid)
	t[7] = uint32(id.IDVersion)
	return t
}

// Token returns the start token of the instance for boot; the zero Token
// when the start time was not read.
func (id Ident) Token(boot procfs.BootID) token.Token {
	if id.StartMicro == 0 {
		return token.Token{}
	}
	return token.Token{Boot: boot, Start: id.StartMicro, Prec: token.Micro, Uniq: id.UniqueID}
}

// Kernel is the part of XNU the judge, the lineage and the teardown use.
// System is the real one (darwin); the tests run a simulated one.
type Kernel interface {
	// Identity reads pid's identity from one reply: flavor 18 where
	// permitted, else flavor 17 (StartMicro 0, HasCreds false). A zombie
	// or an absent pid wraps ErrNoProcess.
	Identity(pid int32) (Ident, error)
	// IDs reads pid's ids alone (flavor 17: uniqueid, puniqueid, pid
	// version; any uid), the cheap read a look at every process takes.
	IDs(pid int32) (Ident, error)
	// Pids lists every pid in the process table, zombies included.
	Pids() ([]int32, error)
	// Signal sends sig to the instance the token names. ESRCH wraps
	// ErrNoProcess, EPERM ErrPermission; a system without the call wraps
	// ErrNoTokenSignal and signals nothing.
	Signal(t AuditToken, sig unix.Signal) error
	// CanSignal reports why Signal cannot work here (wrapping
	// ErrNoTokenSignal), or nil.
	CanSignal() error
}

// Note is one EVFILT_PROC event.
type Note struct {
	Pid              int32
	Fork, Exec, Exit bool
}

// Watcher is a kqueue with EVFILT_PROC knotes.
type Watcher interface {
	// Attach watches the instance at pid now for fork, exec and exit; a
	// zombie or an absent pid wraps ErrNoProcess. The caller confirms
	// afterwards that the instance is the one it means.
	Attach(pid int32) error
	// Detach stops watching pid.
	Detach(pid int32) error
	// Wait returns the notes pending, waiting up to d for the first.
	Wait(d time.Duration) ([]Note, error)
}
