package fallback

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// ReadBootTime reads the boot time in Unix seconds from the btime line of
// root/stat (Linux /proc/stat). The kernel derives it from the current wall
// clock minus the uptime, so it moves when the clock is stepped.
func ReadBootTime(root string) (int64, error) {
	b, err := os.ReadFile(root + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read boot time: %w", err)
	}
	return parseBootTime(b)
}

func parseBootTime(b []byte) (int64, error) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			t, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil || t <= 0 {
				return 0, fmt.Errorf("stat: bad btime %q", v)
			}
			return t, nil
		}
	}
	return 0, fmt.Errorf("stat: no btime line")
}

// darwinBoot lays out the macOS boot identity (see HostBoot on darwin).
func darwinBoot(sec, usec int64) procfs.BootID {
	var id procfs.BootID
	binary.BigEndian.PutUint64(id[0:8], uint64(sec))
	binary.BigEndian.PutUint32(id[8:12], uint32(usec))
	copy(id[12:], "mac\x00")
	return id
}
