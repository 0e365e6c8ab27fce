package logfeed

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// boottimeNow reads CLOCK_BOOTTIME without telling the runtime of a
// system call (it never blocks): a call through the runtime wakes its
// sleeping sysmon thread, which then ticks every 20 µs for as long as the
// event path is busy.
func boottimeNow() (int64, bool) {
	var ts unix.Timespec
	_, _, errno := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_BOOTTIME, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}

func readBootID() procfs.BootID {
	b, _ := procfs.ReadBootID("/proc")
	return b
}
