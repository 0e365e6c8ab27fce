package logfeed

import (
	"os"

	"golang.org/x/sys/unix"
)

// canReserve reports whether f is a regular file on a filesystem where
// reserving its blocks ahead of the writes makes them cheaper: ext4 (and
// ext2/3 files it mounts, which refuse the call when they have no extents)
// and XFS. Not tmpfs (the reservation would be memory), not btrfs (copy
// on write), not a remote filesystem.
func canReserve(f *os.File) bool {
	var fs unix.Statfs_t
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &fs) }); err != nil || serr != nil {
		return false
	}
	return fs.Type == unix.EXT4_SUPER_MAGIC || fs.Type == unix.XFS_SUPER_MAGIC
}

// reserve allocates f's blocks from off for n bytes without changing its
// size (FALLOC_FL_KEEP_SIZE: readers see only what was written).
func reserve(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
	}); err != nil {
		return err
	}
	return ferr
}
