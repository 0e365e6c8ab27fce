package pidfd

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Epoll is an epoll set for waiting on many pidfds in one thread (a pidfd
// is readable once its process has exited), with an eventfd in it that
// Wake makes readable: closing a descriptor does not end an epoll_wait
// blocked on it, so a loop stops when it meets WakeFd's event.
type Epoll struct {
	Fd, WakeFd int
}

// NewEpoll makes an Epoll; Close releases it once no loop waits in it.
func NewEpoll() (Epoll, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return Epoll{}, fmt.Errorf("epoll_create1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return Epoll{}, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return Epoll{}, fmt.Errorf("epoll_ctl: %w", err)
	}
	return Epoll{Fd: epfd, WakeFd: wake}, nil
}

// Wake makes WakeFd readable (it stays so: every later wait meets it).
func (e Epoll) Wake() error {
	one := [8]byte{1}
	if _, err := unix.Write(e.WakeFd, one[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("eventfd write: %w", err)
	}
	return nil
}

// Close closes both descriptors.
func (e Epoll) Close() error {
	return errors.Join(unix.Close(e.Fd), unix.Close(e.WakeFd))
}
