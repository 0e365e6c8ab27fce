package actions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
)

// ExitWaiter waits for members to exit, through their pidfds, for every
// teardown of a process at once: one goroutine blocks in epoll_wait for all
// of them, and a teardown waiting out its grace parks its goroutine, not a
// thread. Each teardown blocking in poll(2) held a thread of its own: a
// user's thousand releases with an hour's grace held a thousand threads,
// and ten such users passed the Go runtime's limit of 10,000 threads, which
// ends the process (and a restart resumed the teardowns, and died again).
//
// A pidfd is registered for one wait (EPOLLONESHOT) and removed when the
// wait ends, before its owner can close it. A wake-up meant for a pidfd
// number since reused by another teardown wakes that one for nothing: it
// looks at its members and waits again.
type ExitWaiter struct {
	ep   pidfd.Epoll
	done chan struct{} // closed when run returns

	mu      sync.Mutex
	closed  bool                    // by Close: no new registration
	ran     bool                    // run has returned (seen by Close)
	freed   bool                    // ep closed, by the last to use it
	waiting map[int32]chan struct{} // by pidfd number
	waits   int                     // Wait calls in progress
}

// NewExitWaiter starts an ExitWaiter; Close stops it.
func NewExitWaiter() (*ExitWaiter, error) {
	ep, err := pidfd.NewEpoll()
	if err != nil {
		return nil, fmt.Errorf("exit waiter: %w", err)
	}
	w := &ExitWaiter{ep: ep, done: make(chan struct{}), waiting: map[int32]chan struct{}{}}
	go w.run()
	return w, nil
}

// run hands each readable pidfd's wake-up to its waiter, until Close.
func (w *ExitWaiter) run() {
	defer close(w.done)
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.ep.Fd, evs, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Cannot happen with a valid epoll descriptor; waits from
			// now on poll on their own (Wait sees closed).
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
			return
		}
		for _, ev := range evs[:n] {
			if ev.Fd == int32(w.ep.WakeFd) {
				return
			}
			w.mu.Lock()
			ch := w.waiting[ev.Fd]
			w.mu.Unlock()
			if ch != nil {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}
}

// Close stops the waiter. A Wait called after it polls on its own; one
// in progress is woken by its timer or context only. The descriptors are
// released once run has returned and no Wait uses them, by whichever of
// Close and the last Wait comes later: no wake-up, wait or deregistration
// reaches a descriptor number reused meanwhile.
func (w *ExitWaiter) Close() error {
	w.mu.Lock()
	if w.freed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	if err := w.ep.Wake(); err != nil {
		return fmt.Errorf("exit waiter: %w", err)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ran = true
	return w.free()
}

// free closes the descriptors once run has returned and no wait uses
// them; w.mu held.
func (w *ExitWaiter) free() error {
	if !w.ran || w.waits > 0 || w.freed {
		return nil
	}
	w.freed = true
	return w.ep.Close()
}

// Waits returns how many waits are in progress.
func (w *ExitWaiter) Waits() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waits
}

// Wait waits until one of the pidfds in fds is readable (its process has
// exited), d has passed or ctx is done, and reports whether a pidfd woke
// it (possibly for nothing: see ExitWaiter). A nil or closed waiter, or a
// pidfd it cannot register, polls in this thread as before.
func (w *ExitWaiter) Wait(ctx context.Context, fds []unix.PollFd, d time.Duration) bool {
	if w == nil || len(fds) == 0 {
		return pollWait(fds, d)
	}
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return pollWait(fds, d)
	}
	w.waits++
	for _, f := range fds {
		w.waiting[f.Fd] = ch
	}
	w.mu.Unlock()
	added := 0
	var err error
	for _, f := range fds {
		if err = unix.EpollCtl(w.ep.Fd, unix.EPOLL_CTL_ADD, int(f.Fd), &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: f.Fd}); err != nil {
			break
		}
		added++
	}
	woken := false
	if err == nil {
		t := time.NewTimer(d)
		select {
		case <-ch:
			woken = true
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	for _, f := range fds[:added] {
		unix.EpollCtl(w.ep.Fd, unix.EPOLL_CTL_DEL, int(f.Fd), nil)
	}
	w.mu.Lock()
	for _, f := range fds {
		if w.waiting[f.Fd] == ch {
			delete(w.waiting, f.Fd)
		}
	}
	w.waits--
	w.free()
	w.mu.Unlock()
	if err != nil {
		return pollWait(fds, d) // no room in the kernel for the registration
	}
	return woken
}
