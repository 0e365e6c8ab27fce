package proccon

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
)

// sock is the kernel socket once it has left the runtime's poller.
//
// Why: the Go runtime registers every non-blocking socket in its one epoll
// set, edge-triggered, and the kernel wakes a thread sleeping in that
// epoll_wait for every datagram queued, whether a goroutine waits for the
// socket or not. Under a fork storm Read naps instead of being woken per
// message, but the runtime thread that sleeps until the nap's timer (or,
// in the daemon, waits for its API socket) was still woken for every
// message: a context switch per message and, with the sleeper on another
// CPU, an IPI, both paid partly by the storm (sock_def_readable in its
// fork path). So the socket is taken out of the poller after Dial (a
// duplicate is kept, the netlink.Conn closed, which removes it from the
// epoll set), read with raw non-blocking recvmmsg(2), and put back in the
// poller, as a fresh duplicate, only while Read waits for traffic; a nap
// takes it out again. Waiting stays in the poller rather than in a
// blocking system call, which would hand the P over and reset the
// runtime's sysmon to 20 µs ticks after every wake-up.
type sock struct {
	mu   sync.Mutex // held by a raw receive and by close: fd is never closed under a receive
	fd   int        // -1 once closed
	pid  uint32     // the socket's netlink port id
	wait *os.File   // a duplicate of fd in the runtime's poller, nil when out
	wrc  syscall.RawConn
}

// detach takes c's socket out of the runtime's poller: it keeps a
// duplicate of the descriptor and closes c.
func detach(c *netlink.Conn, rc syscall.RawConn) (*sock, error) {
	fd := -1
	var derr error
	if err := rc.Control(func(raw uintptr) {
		fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("proc connector: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("proc connector: dup: %w", derr)
	}
	k := &sock{fd: fd, pid: c.PID()}
	if err := c.Close(); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("proc connector: close conn: %w", err)
	}
	return k, nil
}

// recv does one raw recvmmsg(2) (through fn) unless the socket is closed.
func (k *sock) recv(fn func(fd uintptr) bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return events.ErrClosed
	}
	fn(uintptr(k.fd))
	return nil
}

// waiter puts a duplicate of the socket in the runtime's poller, unless one
// is there already, and returns its RawConn; Read waits on it. A non-zero
// deadline bounds the wait (os.ErrDeadlineExceeded).
func (k *sock) waiter(deadline time.Time) (syscall.RawConn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return nil, events.ErrClosed
	}
	if k.wait == nil {
		fd, err := unix.FcntlInt(uintptr(k.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("proc connector: dup: %w", err)
		}
		// The duplicate shares O_NONBLOCK with fd, so NewFile makes it
		// pollable.
		f := os.NewFile(uintptr(fd), "proc connector")
		rc, err := f.SyscallConn()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("proc connector: %w", err)
		}
		k.wait, k.wrc = f, rc
	}
	if err := k.wait.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("proc connector: %w", err)
	}
	return k.wrc, nil
}

// unwait takes the socket out of the runtime's poller (closing the
// duplicate removes it from the epoll set).
func (k *sock) unwait() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unwaitLocked()
}

func (k *sock) unwaitLocked() {
	if k.wait != nil {
		_ = k.wait.Close()
		k.wait, k.wrc = nil, nil
	}
}

// send sends one netlink message to the kernel (port 0).
func (k *sock) send(m netlink.Message) error {
	m.Header.Length = uint32(unix.NLMSG_HDRLEN + len(m.Data))
	m.Header.PID = k.pid
	m.Header.Sequence = 1
	b, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return events.ErrClosed
	}
	return unix.Sendto(k.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// dropCount reads the socket's drop counter (SO_MEMINFO).
func (k *sock) dropCount() (uint32, bool) {
	var mem [unix.SK_MEMINFO_VARS]uint32
	size := uint32(unsafe.Sizeof(mem))
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return 0, false
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(k.fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 || size <= unix.SK_MEMINFO_DROPS*4 {
		return 0, false
	}
	return mem[unix.SK_MEMINFO_DROPS], true
}

// close ends a wait in the poller (closing the duplicate wakes it) and
// closes the socket; ignore, if not nil, is sent first.
func (k *sock) close(ignore *netlink.Message) error {
	if ignore != nil {
		_ = k.send(*ignore) // best effort: closing unsubscribes anyway
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return nil
	}
	k.unwaitLocked()
	err := unix.Close(k.fd)
	k.fd = -1
	if err != nil {
		return fmt.Errorf("proc connector: close: %w", err)
	}
	return nil
}

// setReadBuffer sets the receive buffer (SO_RCVBUFFORCE, else SO_RCVBUF).
func (k *sock) setReadBuffer(n int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return events.ErrClosed
	}
	if err := unix.SetsockoptInt(k.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); err == nil {
		return nil
	}
	return unix.SetsockoptInt(k.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
}
