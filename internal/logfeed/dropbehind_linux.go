package logfeed

import "golang.org/x/sys/unix"

// adviseDontNeed asks the kernel to write back and drop the page cache of
// fd's bytes [off, off+n).
func adviseDontNeed(fd int, off, n int64) {
	_ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) // advice: nothing to undo
}
