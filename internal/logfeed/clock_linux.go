package logfeed

import (
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

func boottimeNow() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

func readBootID() procfs.BootID {
	b, _ := procfs.ReadBootID("/proc")
	return b
}
