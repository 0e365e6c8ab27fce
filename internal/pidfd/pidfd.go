// Package pidfd binds the supervisor to one process instance. A Handle holds
// a pidfd, which keeps naming the process it was opened on even after the
// kernel reissues the pid, so a signal sent through it can never reach a
// stranger. The instance's token is read after the pidfd is opened and
// confirmed by a signal 0 through the same pidfd: if the process is still
// there afterwards, everything read in between described it.
//
// Limits: Linux 5.3+ (pidfd_open); the pidfs inode in tokens needs 6.9+.
// On other systems Open returns ErrNotSupported.
package pidfd

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

var (
	// ErrGone: no process holds the pid (or it was reaped while binding).
	ErrGone = errors.New("no such process")
	// ErrNotProcess: the id names a thread that is not a thread group
	// leader, not a process.
	ErrNotProcess = errors.New("a thread id, not a process id")
	// ErrInvalidPid: the number cannot be a process id (0, negative, beyond
	// the kernel's limit).
	ErrInvalidPid = errors.New("not a valid process id")
	// ErrNotSupported: the system has no pidfd.
	ErrNotSupported = errors.New("pidfd not supported on this system")
	// ErrUnreadable: the pidfd says the process lives, but its /proc
	// entry cannot be read, so nothing about its identity can be proven.
	ErrUnreadable = errors.New("process alive but unreadable")
	// ErrResource: this process lacked a resource to look (descriptors,
	// memory: EMFILE, ENFILE, ENOMEM, EAGAIN): it says nothing about the
	// process looked at, and the same look may succeed later.
	ErrResource = errors.New("out of a resource needed to inspect a process")
)

// Short reports whether err is this process running short of a resource
// it needed to look at a process (ErrResource, or the system's EMFILE,
// ENFILE, ENOMEM, EAGAIN): it says nothing about the process.
func Short(err error) bool {
	return errors.Is(err, ErrResource) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN)
}

// MaxPid is the kernel's hard limit on pid numbers (PID_MAX_LIMIT).
const MaxPid = 4 << 20

// ThreadError reports a thread id given where a process id was expected.
type ThreadError struct {
	Tid, Tgid int32
}

func (e *ThreadError) Error() string {
	return fmt.Sprintf("%d is a thread of process %d, not a process", e.Tid, e.Tgid)
}

// Unwrap lets callers match ErrNotProcess.
func (e *ThreadError) Unwrap() error { return ErrNotProcess }

// CheckPid rejects numbers that can never be a process id. Zero and negative
// numbers are dangerous as well as wrong: kill(2) reads them as process
// groups.
func CheckPid(pid int64) error {
	if pid <= 0 || pid > MaxPid {
		return fmt.Errorf("pid %d: %w", pid, ErrInvalidPid)
	}
	return nil
}

// ReadToken binds a pidfd to pid, returns the token of the process it names
// and lets it go: `supervisor token`, and the caller a launched grant is
// bound to. A zombie has exited and can no longer be claimed: ReadToken
// reports it as ErrGone. Errors are Open's.
func ReadToken(pid int32, boot procfs.BootID) (token.Token, error) {
	h, err := Open(pid, boot)
	if err != nil {
		return token.Token{}, err
	}
	defer h.Close()
	if h.Zombie() {
		return token.Token{}, fmt.Errorf("pid %d has exited (a zombie awaiting reaping): %w", pid, ErrGone)
	}
	return h.Token(), nil
}
