package logfeed

// cacheWindow is how much of the end of its file the feed leaves in the
// page cache: a shipper tailing the file reads the newest lines from
// memory, and everything further behind is advised away.
//
// Why: the feed only appends, and nothing in the daemon reads the file
// back. Left alone, every line stays in the page cache until memory runs
// short (600 MiB for a full set of rotated files), pushing out the cache
// of the workloads the host exists for; and the kernel keeps taking fresh
// pages for it, which on a VM whose host has not yet backed them costs a
// host fault each (on this project's PVM guest, writing 12 KB of lines
// took 55 µs of system time into fresh pages and 4 µs into reused ones).
// Dropping what is behind the window gives the pages back, to be reused
// for the next lines.
//
// How: each time the end of the file passes another window, dropBehind
// advises POSIX_FADV_DONTNEED on everything from a window before the
// previous call's end up to a window before the end. The kernel starts
// writeback of the dirty pages in the range and drops the clean ones; a
// page still dirty or under writeback stays, and the next call, which
// covers that range again, drops it then. A page not yet written back
// after both calls stays until the kernel reclaims it or the file is
// rotated and deleted: the advice is best effort and never loses a line.
// The writeback it starts is charged to the daemon's drain goroutine
// instead of the kernel's flusher threads (the disk writes are the same).
var cacheWindow int64 = 8 << 20

// dropBehind advises the page cache of f away behind the window (see
// cacheWindow), when the file has grown another window since the last
// advice. Only the drain goroutine calls it.
func (fo *fileOut) dropBehind() {
	end := fo.size - cacheWindow
	if end-fo.dropped < cacheWindow || fo.special.Load() {
		return
	}
	start := max(0, fo.dropped-cacheWindow)
	fo.mu.Lock()
	defer fo.mu.Unlock()
	if fo.f == nil {
		return
	}
	rc, err := fo.f.SyscallConn()
	if err != nil {
		return
	}
	// Advice: a failure changes nothing but the page cache.
	_ = rc.Control(func(fd uintptr) { adviseDontNeed(int(fd), start, end-start) })
	fo.dropped = end
}
