package tracker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
)

// ErrBehind reports that the graph did not catch up with the kernel's
// events within the time Sync was given.
var ErrBehind = errors.New("the event reader is behind the kernel")

// barrier is a source that can tell when its reader has dealt with every
// record the kernel had for it at some moment (tracepoint.Source: the eBPF
// ring's producer position, which its programs advance before the fork,
// exec or exit they report returns).
type barrier interface {
	Barrier() (pos uint64, ok bool)
	Reached(pos uint64) bool
	Kick()
}

// Sync returns once every event the source had from the kernel when Sync
// was called has been applied to the graph and shown to Options.OnEvent:
// a fork that returned to its caller before a request arrived is in the
// graph when the request reads it. With eBPF the reader otherwise finds
// most records at its next straggle poll, tens of milliseconds later; Sync
// has it look at once.
//
// With netlink and polling Sync returns at once: the proc connector wakes
// its reader for each message (a reader still working through a backlog
// is not waited for), and a poller knows only what its last snapshot saw.
// It returns ErrBehind, wrapped, when ctx ends first, and
// events.ErrClosed, wrapped, once the tracker has stopped.
func (t *Tracker) Sync(ctx context.Context) error {
	b := t.barrier
	if b == nil {
		return nil
	}
	target, ok := b.Barrier()
	if !ok || b.Reached(target) {
		return nil
	}
	// A kick makes the reader drain the ring; a record still being written
	// at the barrier (reserved, not committed) holds it back a few
	// microseconds, so kick again, less and less often, until it is read.
	wait := 50 * time.Microsecond
	tm := time.NewTimer(wait)
	defer tm.Stop()
	for {
		b.Kick()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBehind, context.Cause(ctx))
		case <-t.done:
			return fmt.Errorf("tracker stopped: %w", events.ErrClosed)
		case <-tm.C:
		}
		if b.Reached(target) {
			return nil
		}
		wait = min(2*wait, 5*time.Millisecond)
		tm.Reset(wait)
	}
}
