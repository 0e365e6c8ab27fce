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

// reissueAfter is how long Sync waits for a barrier before it asks for
// another: the proc connector's marker can be lost in a socket overflow.
const reissueAfter = 250 * time.Millisecond

// barrier is a source that can tell when its reader has dealt with every
// record the kernel had for it at some moment: tracepoint.Source by the
// eBPF ring's producer position, which its programs advance before the
// fork, exec or exit they report returns; proccon.Source by a marker
// message it has the kernel queue behind the others.
type barrier interface {
	Barrier() (pos uint64, ok bool)
	Reached(pos uint64) bool
	Kick()
}

// Sync returns once every event the source had from the kernel when Sync
// was called has been applied to the graph and shown to Options.OnEvent:
// a fork that returned to its caller before a request arrived is in the
// graph when the request reads it. With eBPF the reader otherwise finds
// most records at its next straggle poll, tens of milliseconds later; with
// netlink it may be working through a backlog. Sync has it look at once
// and waits until it is past that point. (A process exit the netlink
// source holds back for its other threads' exits may still come later.)
//
// With polling Sync returns at once: a poller knows only what its last
// snapshot saw. A barrier lost in an overflow is asked again after
// reissueAfter. Sync returns ErrBehind, wrapped, when ctx ends first, and
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
	asked := time.Now()
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
		if time.Since(asked) > reissueAfter {
			// Lost in an overflow? A later point serves as well.
			if next, ok := b.Barrier(); ok {
				target, asked = next, time.Now()
			}
		}
		wait = min(2*wait, 5*time.Millisecond)
		tm.Reset(wait)
	}
}
