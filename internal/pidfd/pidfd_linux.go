package pidfd

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// readers reuse /proc readers (each holds a 1 KiB buffer) across binds.
var readers = sync.Pool{New: func() any { return procfs.NewReader("/proc") }}

// pidfsMagic is the file system magic of pidfs (PIDFS_MAGIC, Linux 6.9+).
const pidfsMagic = 0x50494446

// Handle is a pidfd bound to one process instance, with what was read about
// that instance while binding.
type Handle struct {
	fd    int
	pid   int32
	tok   token.Token
	stat  procfs.Stat
	alive bool
}

// Open binds a pidfd to the process pid and reads its token. boot is the
// current boot id. Errors: ErrInvalidPid, ErrGone, *ThreadError,
// ErrResource (with the system error), or a wrapped system error.
func Open(pid int32, boot procfs.BootID) (*Handle, error) {
	if err := CheckPid(int64(pid)); err != nil {
		return nil, err
	}
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ESRCH):
			return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// Kernels answer a non-leader thread id with EINVAL or ENOENT.
			tgid, terr := procfs.Tgid("/proc", pid)
			switch {
			case terr == nil && tgid != pid:
				return nil, &ThreadError{Tid: pid, Tgid: tgid}
			case Short(terr):
				return nil, fmt.Errorf("pid %d: %w: %w", pid, ErrResource, terr)
			}
			return nil, fmt.Errorf("pid %d: %w", pid, ErrGone)
		case errors.Is(err, unix.ENOSYS):
			return nil, ErrNotSupported
		case Short(err):
			return nil, fmt.Errorf("pidfd_open %d: %w: %w", pid, ErrResource, err)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	h := &Handle{fd: fd, pid: pid}
	if err := h.bind(boot); err != nil {
		unix.Close(fd)
		if Short(err) && !errors.Is(err, ErrResource) {
			err = fmt.Errorf("%w: %w", ErrResource, err)
		}
		return nil, err
	}
	return h, nil
}

func (h *Handle) bind(boot procfs.BootID) error {
	ino, err := inode(h.fd)
	if err != nil {
		return err
	}
	r := readers.Get().(*procfs.Reader)
	err = r.ReadStat(h.pid, &h.stat)
	readers.Put(r)
	if err != nil {
		// A missing entry means gone only if the pidfd agrees: a live
		// process whose /proc entry this mount namespace cannot see (a
		// bind mount over it, another /proc) is alive but unreadable.
		if errors.Is(err, os.ErrNotExist) {
			if serr := unix.PidfdSendSignal(h.fd, 0, nil, 0); errors.Is(serr, unix.ESRCH) {
				return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
			}
			return fmt.Errorf("pid %d is alive but its /proc entry cannot be read: %w", h.pid, ErrUnreadable)
		}
		return fmt.Errorf("pid %d: %w", h.pid, err)
	}
	// Confirm: the pidfd's process still exists, so the pid could not have
	// been reissued since the open, and the stat we read was its own.
	if err := unix.PidfdSendSignal(h.fd, 0, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
		}
		if !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("pid %d: confirm: %w", h.pid, err)
		}
	}
	h.tok = token.Token{Boot: boot, Start: h.stat.StartTime, Ino: ino, Prec: token.Ticks}
	// /proc shows the leader's state: Z once its main thread exited,
	// while other threads may run on. The pidfd is readable only when the
	// whole thread group has (the kernel's pidfd_poll): only then is the
	// process a zombie.
	h.alive = !h.stat.Zombie() || !h.Exited()
	return nil
}

// pidfsState caches whether pidfds live on pidfs, a property of the running
// kernel: 0 not known yet, 1 yes, 2 no. Only answers are cached, not errors.
var pidfsState atomic.Int32

// inode returns the pidfs inode id of the pidfd, or 0 when the kernel has no
// pidfs (before 6.9, pidfds were anonymous inodes that all share one number).
func inode(fd int) (uint64, error) {
	switch pidfsState.Load() {
	case 2:
		return 0, nil
	case 0:
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return 0, fmt.Errorf("fstatfs pidfd: %w", err)
		}
		if sfs.Type != pidfsMagic {
			pidfsState.Store(2)
			return 0, nil
		}
		pidfsState.Store(1)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("fstat pidfd: %w", err)
	}
	return st.Ino, nil
}

// Pid returns the pid the handle was opened on.
func (h *Handle) Pid() int32 { return h.pid }

// Token returns the token read while binding.
func (h *Handle) Token() token.Token { return h.tok }

// Stat returns the /proc stat read while binding.
func (h *Handle) Stat() procfs.Stat { return h.stat }

// Zombie reports whether the process had already exited when bound.
func (h *Handle) Zombie() bool { return !h.alive }

// Signal sends sig to the bound process, and only to it. ErrGone means it
// has exited and been reaped.
func (h *Handle) Signal(sig unix.Signal) error {
	if err := unix.PidfdSendSignal(h.fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pid %d: %w", h.pid, ErrGone)
		}
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, err)
	}
	return nil
}

// Exited reports whether the bound process has terminated (a zombie or
// reaped). It does not block.
func (h *Handle) Exited() bool {
	exited, ok := pollExit(h.fd)
	return ok && exited
}

// FdExited reports whether the process pidfd fd names is known to have
// terminated: the poll succeeded and the pidfd is readable, which for a
// process (a thread group) is once every thread has exited, not when its
// main thread alone has (that one shows as a zombie in /proc while its
// other threads run). A failed poll is not exited.
func FdExited(fd int) bool {
	exited, ok := pollExit(fd)
	return ok && exited
}

// FdAlive reports whether the process pidfd fd names is known not to
// have terminated: the poll succeeded and the pidfd is not readable (it
// becomes readable when its process exits). A failed poll is not alive.
// It does not block. For a pidfd not bound through Open (one a socket
// gave, or one handed to a spawn).
func FdAlive(fd int) bool {
	exited, ok := pollExit(fd)
	return ok && !exited
}

// pollExit polls pidfd fd without waiting: whether its process has
// exited, and whether the poll could tell.
func pollExit(fd int) (exited, ok bool) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return n > 0, err == nil
}

// Wait blocks until the bound process terminates or d passes, and reports
// whether it terminated.
func (h *Handle) Wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms < 0 {
			ms = 0
		}
		fds := []unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err == nil {
			return n > 0
		}
		if !errors.Is(err, unix.EINTR) || time.Now().After(deadline) {
			return h.Exited()
		}
	}
}

// Fd returns the pidfd, for callers that wait on many handles at once. It
// stays owned by the Handle.
func (h *Handle) Fd() int { return h.fd }

// Close releases the pidfd.
func (h *Handle) Close() error {
	if h.fd < 0 {
		return nil
	}
	err := unix.Close(h.fd)
	h.fd = -1
	return err
}
