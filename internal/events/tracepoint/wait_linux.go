//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readyWaiter waits, in the Go runtime's netpoller, until the ring buffer
// has data or a deadline passes. It owns a private epoll set holding the
// ring buffer map's file descriptor (readable when a program committed a
// record with a wake-up), a one-shot CLOCK_MONOTONIC timerfd armed for
// the deadline, and an eventfd another goroutine writes to make the
// reader look at the ring now (kick: a caller that must see every record
// committed so far, see Source.Barrier); the netpoller watches the epoll
// set's own descriptor, which is readable when any of them is.
//
// No thread sits in a blocking system call while the reader waits: a
// blocking epoll_wait of up to 10 ms (the straggle poll) made the runtime
// retake the thread's P and reset its sysmon thread to its fastest tick.
// And the deadline is no Go runtime timer: a read deadline on the file
// (os.File.SetReadDeadline) was one, and at each one both the thread
// blocked in the netpoller and sysmon, which sleeps only until the next
// timer when all Ps are idle, woke. The timerfd wakes the netpoller alone,
// through the epoll set.
//
// The timer is set with timerfd_settime only when the deadline changes,
// and that call also clears an expiry nobody read, so a stale expiry never
// cuts a later wait short. Both timerfd_settime and the expiry check run
// without telling the runtime of a system call (they never block), which
// would wake a sleeping sysmon too.
type readyWaiter struct {
	f   *os.File // the epoll set, given to the netpoller
	rc  syscall.RawConn
	tfd int // the timerfd, in the epoll set
	efd int // the eventfd kick writes, in the epoll set
	// kicked is set by kick before it writes efd, and cleared by the
	// waiter before it reads efd back to zero: one write per wait, however
	// many callers kick.
	kicked atomic.Bool
	// deadline is the one the timer is armed for, zero when disarmed (at
	// first).
	deadline time.Time
	// try and res are wait's arguments, for tryOrExpire; tryFn is
	// tryOrExpire, made once so that a wait allocates nothing.
	try   func(uintptr) bool
	res   *error
	tryFn func(uintptr) bool
}

// newReadyWaiter puts fd and a timerfd in a new epoll set and gives the
// set to the netpoller. It fails when the runtime cannot poll the set; the
// caller then lets the ring buffer reader block instead.
func newReadyWaiter(fd int) (*readyWaiter, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		unix.Close(tfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	closeFds := func() {
		unix.Close(tfd)
		unix.Close(efd)
	}
	fail := func(format string, err error) (*readyWaiter, error) {
		unix.Close(epfd)
		closeFds()
		return nil, fmt.Errorf(format, err)
	}
	for _, add := range []struct {
		fd   int
		name string
	}{{fd, "ring buffer"}, {tfd, "timerfd"}, {efd, "eventfd"}} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(add.fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, add.fd, &ev); err != nil {
			return fail("epoll_ctl add "+add.name+": %w", err)
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		return fail("epoll fd non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(epfd), "ringwait")
	// A file the netpoller could not take has no deadlines.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		closeFds()
		return nil, fmt.Errorf("epoll fd not pollable: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		closeFds()
		return nil, fmt.Errorf("epoll fd: %w", err)
	}
	w := &readyWaiter{f: f, rc: rc, tfd: tfd, efd: efd}
	w.tryFn = w.tryOrExpire
	return w, nil
}

// wait calls try, and again each time the netpoller says the ring became
// readable, until it returns true or deadline (none when zero) passes.
// try reads without blocking and leaves its result in *res (try is the
// function syscall.RawConn.Read takes, so that no closure is allocated).
// Readiness is reset before the first try, so a wake-up between a try and
// the wait is never lost; a record ready when the deadline passes is
// still read. wait returns *res, os.ErrDeadlineExceeded, or an error of
// the closed file.
func (w *readyWaiter) wait(deadline time.Time, try func(uintptr) bool, res *error) error {
	if !deadline.Equal(w.deadline) {
		if err := w.arm(deadline); err != nil {
			return err
		}
	}
	w.try, w.res = try, res
	err := w.rc.Read(w.tryFn)
	w.try, w.res = nil, nil
	if err != nil {
		return err
	}
	return *res
}

// tryOrExpire is the function the netpoller calls: the caller's try, and
// when the ring is drained, os.ErrDeadlineExceeded once the deadline has
// passed. The timerfd only wakes the netpoller: Go's clock and the
// timer's are both CLOCK_MONOTONIC, and the timer never fires before the
// deadline, so the clock says whether it passed without a read.
func (w *readyWaiter) tryOrExpire(fd uintptr) bool {
	if w.kicked.Swap(false) {
		// Back to zero, so that the epoll set is not readable for this
		// kick any more (a later kick makes it readable again).
		var buf [8]byte
		unix.RawSyscall(unix.SYS_READ, uintptr(w.efd), uintptr(unsafe.Pointer(&buf[0])), 8)
	}
	if w.try(fd) {
		return true
	}
	if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
		*w.res = os.ErrDeadlineExceeded
		return true
	}
	return false
}

// arm sets the timer to fire at deadline, or disarms it for the zero time.
// The timer is set relative to now, measured before the call: it fires
// no earlier than deadline.
func (w *readyWaiter) arm(deadline time.Time) error {
	var spec unix.ItimerSpec
	if !deadline.IsZero() {
		// it_value zero would disarm: a due deadline fires at once.
		spec.Value = unix.NsecToTimespec(max(int64(time.Until(deadline)), 1))
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(w.tfd), 0,
		uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("timerfd_settime: %w", errno)
	}
	w.deadline = deadline
	return nil
}

// kick makes a wait in progress (or the next one) call try at once; safe
// from any goroutine, and until release.
func (w *readyWaiter) kick() {
	if w.kicked.Swap(true) {
		return // written and not read back yet
	}
	one := [8]byte{1}
	// EAGAIN only at a counter near 2^64: readable anyway.
	unix.RawSyscall(unix.SYS_WRITE, uintptr(w.efd), uintptr(unsafe.Pointer(&one[0])), 8)
}

// close wakes a wait in progress, which then fails. The timerfd stays
// until release: a Read may still be arming it.
func (w *readyWaiter) close() error { return w.f.Close() }

// release closes the timerfd and the eventfd; no wait or kick may run or
// follow.
func (w *readyWaiter) release() error {
	if err := unix.Close(w.tfd); err != nil {
		return fmt.Errorf("close timerfd: %w", err)
	}
	if err := unix.Close(w.efd); err != nil {
		return fmt.Errorf("close eventfd: %w", err)
	}
	return nil
}

// closeAll closes both, when no wait runs.
func (w *readyWaiter) closeAll() error { return errors.Join(w.close(), w.release()) }
