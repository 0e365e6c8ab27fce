package fallback

import (
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// HostBoot returns the identity of the current boot for tokens: on Linux the
// kernel's boot id, the same value every other mechanism uses.
func HostBoot() (procfs.BootID, error) { return procfs.ReadBootID("/proc") }

// bootTick returns the current CLOCK_BOOTTIME in clock ticks (USER_HZ,
// 100 a second), the clock and unit of /proc start times; 0 when it cannot
// be read.
func bootTick() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Nano()) / 10_000_000
}
