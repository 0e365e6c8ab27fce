//go:build !linux

package actions

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// ExitWaiter is Linux's (epoll over pidfds); elsewhere a teardown polls
// in its own thread.
type ExitWaiter struct{}

// NewExitWaiter is not supported here.
func NewExitWaiter() (*ExitWaiter, error) { return nil, errors.ErrUnsupported }

// Close does nothing.
func (w *ExitWaiter) Close() error { return nil }

// Waits is 0: no wait goes through an ExitWaiter here.
func (w *ExitWaiter) Waits() int { return 0 }

// Wait polls fds in this thread for up to d.
func (w *ExitWaiter) Wait(_ context.Context, fds []unix.PollFd, d time.Duration) bool {
	return pollWait(fds, d)
}
