//go:build !linux

package logfeed

import "github.com/procsupervisor/supervisor/internal/procfs"

func readBootID() procfs.BootID { return procfs.BootID{} }
