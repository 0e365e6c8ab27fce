package fallback

import "github.com/procsupervisor/supervisor/internal/procfs"

// HostBoot returns the identity of the current boot for tokens: on Linux the
// kernel's boot id, the same value every other mechanism uses.
func HostBoot() (procfs.BootID, error) { return procfs.ReadBootID("/proc") }
