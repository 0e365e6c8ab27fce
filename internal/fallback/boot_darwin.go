package fallback

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// HostBoot returns the identity of the current boot for tokens. macOS has no
// boot id file; the identity is derived from kern.boottime, 16 bytes:
//
//	bytes 0-7   boot time, seconds since the epoch, big endian
//	bytes 8-11  boot time, microseconds, big endian
//	bytes 12-15 "mac\x00", so it cannot equal a Linux boot id by accident
//	            (those are random UUIDs with version nibble 4)
//
// The kernel adjusts kern.boottime when the wall clock is stepped, so tokens
// minted before a step compare as OtherBoot after it: an error towards GONE
// or FOREIGN for the old claims, never towards OWNED.
func HostBoot() (procfs.BootID, error) {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return procfs.BootID{}, fmt.Errorf("sysctl kern.boottime: %w", err)
	}
	return darwinBoot(int64(tv.Sec), int64(tv.Usec)), nil
}

// bootTick is 0: start times in clock ticks are a Linux /proc unit.
func bootTick() uint64 { return 0 }
