package proccon

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The barrier. The kernel queues a proc connector message on the socket
// while the call that caused it runs (a fork's before fork returns), so a
// message caused after those is read after them. Barrier causes one: it
// renames the calling thread of this process for an instant to a name
// holding a number (markerPrefix and 10 hex digits, the 15 bytes a name
// has), and the kernel reports the rename (PROC_EVENT_COMM) behind every
// message queued before. Read, meeting the rename of a thread of its own
// process by that name, takes the number as reached: every message before
// it has been handed out, and Read called again. The old name is put back
// at once (a second rename, which Read ignores).
//
// A marker lost in a socket overflow is never met: the caller asks for a
// new barrier when one takes long (tracker.Sync does).

// markerPrefix begins the names Barrier gives; no thread of the daemon has
// such a name otherwise.
const markerPrefix = "supv-"

// Barrier queues a marker behind every message the kernel queued before
// the call and returns its number, for Reached. ok is false on the replay
// path and after Close.
func (s *Source) Barrier() (n uint64, ok bool) {
	if s.k == nil || s.closed.Load() {
		return 0, false
	}
	n = s.syncIssued.Add(1)
	if n >= 1<<40 {
		return 0, false // 10 hex digits: a trillion barriers
	}
	var name [16]byte
	digits := strconv.FormatUint(n, 16)
	copy(name[:], markerPrefix+strings.Repeat("0", 10-len(digits))+digits)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old [16]byte
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0); err != nil {
		return 0, false
	}
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		return 0, false
	}
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0)
	return n, true
}

// Reached reports whether Read has met marker n (or a later one).
func (s *Source) Reached(n uint64) bool { return s.syncSeen.Load() >= n }

// Kick ends a nap of Read (napFor), so that a marker already queued is
// met at once; a Read waiting in the poller is woken by the marker itself.
func (s *Source) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// marker reports whether r is the rename of a thread of this process to a
// marker name, and its number.
func (s *Source) marker(r *rawEvent) (uint64, bool) {
	if int32(r.data[1]) != selfPid {
		return 0, false
	}
	var comm [16]byte
	for i := range 4 {
		ne.PutUint32(comm[4*i:], r.data[2+i])
	}
	if string(comm[:len(markerPrefix)]) != markerPrefix || comm[15] != 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(comm[len(markerPrefix):15]), 16, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// selfPid is this process's pid, whose threads' renames Read looks at.
var selfPid = int32(os.Getpid())
