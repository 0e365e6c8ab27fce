package procfs

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readFile reads path (not NUL terminated; a NUL is appended in place) into
// buf without allocating. ENOENT and ESRCH both mean the process is gone and
// are returned as os.ErrNotExist.
func readFile(path []byte, buf []byte) (int, error) {
	path = append(path, 0)
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, atFDCWD,
		uintptr(unsafe.Pointer(&path[0])), uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return 0, mapErr(errno)
	}
	defer unix.Close(int(fd))
	n, err := unix.Read(int(fd), buf)
	if err != nil {
		return 0, mapErr(err.(unix.Errno))
	}
	return n, nil
}

func mapErr(e unix.Errno) error {
	if e == unix.ENOENT || e == unix.ESRCH {
		return os.ErrNotExist
	}
	return e
}

var fdcwd = unix.AT_FDCWD

// atFDCWD is AT_FDCWD as the raw syscall argument (a negative int).
var atFDCWD = uintptr(fdcwd)
