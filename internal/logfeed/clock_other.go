//go:build !linux

package logfeed

import "github.com/procsupervisor/supervisor/internal/procfs"

// boottimeNow has no CLOCK_BOOTTIME to read outside Linux: event times are
// then the time of logging.
func boottimeNow() (int64, bool) { return 0, false }

func readBootID() procfs.BootID { return procfs.BootID{} }
