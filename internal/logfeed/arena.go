package logfeed

import "unsafe"

// arena is the memory a batch's bytes live in: an anonymous mapping
// outside the Go heap (arena_unix.go), so that the megabytes of lines a
// storm buffers neither count toward the collector's heap goal (at GOGC
// 300 a 2 MiB batch and its spare made the goal 16 MiB larger, and the
// daemon's RSS after a storm 14 MB larger) nor stay resident once the feed
// has been quiet for idleArena: release gives the touched pages back to
// the kernel. A line that does not fit the mapping is appended the usual
// way, on the heap, and the batch returns to its mapping when it is next
// emptied.
//
// Nothing may keep a slice of a batch's bytes past the sink call it was
// passed to (the io.Writer contract; the syslog sink copies into its own
// message).
type arena struct {
	mem []byte // the mapping; nil without one (the heap is used)
	hwm int    // bytes of mem written since the last release
}

// arenaBytes is the size of each batch's mapping: twice a full batch.
// Only the pages written are resident. Past it (a stalled sink lets a
// batch grow to maxBufferBytes) the batch grows on the heap.
const arenaBytes = 2 * batchBytes

// holds reports whether buf lies in the mapping.
func (a *arena) holds(buf []byte) bool {
	return a.mem != nil && cap(buf) == cap(a.mem) && unsafe.SliceData(buf) == unsafe.SliceData(a.mem)
}

// reuse returns buf, a batch's bytes, emptied for the next batch: in the
// mapping when there is one, noting how far buf reached into it.
func (a *arena) reuse(buf []byte) []byte {
	if a.mem == nil {
		return buf[:0]
	}
	switch {
	case a.holds(buf):
		a.hwm = max(a.hwm, len(buf))
	case cap(buf) > 0:
		// It grew past the mapping (every batch starts in it): the
		// mapping was written whole before.
		a.hwm = cap(a.mem)
	}
	return a.mem[:0]
}
