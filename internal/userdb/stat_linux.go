package userdb

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileID is what says a file changed: its device and inode (another file
// renamed over the path), size and modification time.
type fileID struct {
	dev, ino    uint64
	size, mtime int64
}

// statPath reads path's fileID with statx, following a symbolic link as
// os.Stat does, without telling the runtime of a system call: a call
// through the runtime wakes its sleeping sysmon thread, which then ticks
// every 20 µs for as long as the event path is busy, and this runs on the
// event path once a second. A stat of a local file does not wait for
// anything that could hold the thread long.
func statPath(path string) (fileID, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return fileID{}, err
	}
	return statx(unix.AT_FDCWD, p, 0)
}

// statFile reads the open file's fileID.
func statFile(f *os.File) (fileID, error) {
	var empty byte
	return statx(int(f.Fd()), &empty, unix.AT_EMPTY_PATH)
}

func statx(dirfd int, path *byte, flags int) (fileID, error) {
	var st unix.Statx_t
	_, _, errno := unix.RawSyscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(path)),
		uintptr(flags), unix.STATX_BASIC_STATS, uintptr(unsafe.Pointer(&st)), 0)
	if errno != 0 {
		return fileID{}, errno
	}
	return fileID{
		dev:   unix.Mkdev(st.Dev_major, st.Dev_minor),
		ino:   st.Ino,
		size:  int64(st.Size),
		mtime: st.Mtime.Sec*1e9 + int64(st.Mtime.Nsec),
	}, nil
}

func (a fileID) same(b fileID) bool { return a == b }
