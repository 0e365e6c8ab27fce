package boottime

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Now reads CLOCK_BOOTTIME in ns, with a raw system call (see the package
// comment).
func Now() (int64, bool) {
	var ts unix.Timespec
	_, _, errno := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_BOOTTIME, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
