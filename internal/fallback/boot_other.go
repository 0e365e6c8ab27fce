//go:build !linux && !darwin

package fallback

import (
	"fmt"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// HostBoot returns the identity of the current boot; this OS has none the
// supervisor knows how to read.
func HostBoot() (procfs.BootID, error) {
	return procfs.BootID{}, fmt.Errorf("boot identity: %w", events.ErrUnavailable)
}

// bootTick is 0: start times in clock ticks are a Linux /proc unit.
func bootTick() uint64 { return 0 }
