package fallback

import (
	"encoding/binary"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// ReadBootTime reads the boot time in Unix seconds from root/stat (Linux
// /proc/stat; see procfs.ReadBootTime).
func ReadBootTime(root string) (int64, error) { return procfs.ReadBootTime(root) }

// darwinBoot lays out the macOS boot identity (see HostBoot on darwin).
func darwinBoot(sec, usec int64) procfs.BootID {
	var id procfs.BootID
	binary.BigEndian.PutUint64(id[0:8], uint64(sec))
	binary.BigEndian.PutUint32(id[8:12], uint32(usec))
	copy(id[12:], "mac\x00")
	return id
}
