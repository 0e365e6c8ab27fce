package logfeed

import "github.com/procsupervisor/supervisor/internal/procfs"

func readBootID() procfs.BootID {
	b, _ := procfs.ReadBootID("/proc")
	return b
}
