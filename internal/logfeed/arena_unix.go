//go:build unix

package logfeed

import "golang.org/x/sys/unix"

// newArena maps size bytes of anonymous memory; without it (the mapping
// failed) the batch uses the heap.
func newArena(size int) arena {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return arena{}
	}
	return arena{mem: mem[:0:size]}
}

// release gives the pages written since the last release back to the
// kernel (they read as zeros when next written). No batch may hold bytes.
func (a *arena) release() {
	if a.mem == nil || a.hwm == 0 {
		return
	}
	n := min(cap(a.mem), (a.hwm+unix.Getpagesize()-1)&^(unix.Getpagesize()-1))
	_ = unix.Madvise(a.mem[:n], unix.MADV_DONTNEED) // advice: nothing to undo
	a.hwm = 0
}

// free unmaps the arena. Nothing may use its bytes after.
func (a *arena) free() {
	if a.mem != nil {
		_ = unix.Munmap(a.mem[:cap(a.mem)])
		a.mem, a.hwm = nil, 0
	}
}
