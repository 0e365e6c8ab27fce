package procfs

import (
	"bytes"
	"os"
	"strconv"
	"sync"
)

// userHZ is the unit of the start times /proc shows (USER_HZ: 100 on
// every Linux architecture the daemon builds for).
const userHZ = 100

// bootOffsetTicks is the boot-time offset of this process's time
// namespace (/proc/self/timens_offsets, Linux 5.6), in clock ticks. The
// kernel adds it to every start time /proc shows a reader in that
// namespace (`unshare --time --boottime N`), so ParseStat takes it out:
// a start time then reads as the host's, as eBPF and every reader outside
// sees it, and a token read in a time namespace names the same instance.
// It is read once: a process cannot change its own time namespace but by
// setns, which a multithreaded program may not do. 0 outside a time
// namespace, or where the file cannot be read. Limit: an offset that is
// not a whole number of ticks (10 ms) leaves start times one tick off at
// worst (the kernel adds before it divides); unshare's are whole seconds.
var bootOffsetTicks = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/proc/self/timens_offsets")
	if err != nil {
		return 0
	}
	return ParseBootOffset(b)
})

// ParseBootOffset reads the boottime line of a timens_offsets file
// ("boottime <seconds> <nanoseconds>") as clock ticks, 0 when it has none.
func ParseBootOffset(b []byte) int64 {
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[0]) != "boottime" && string(f[0]) != "7" { // CLOCK_BOOTTIME is 7
			continue
		}
		sec, err1 := strconv.ParseInt(string(f[1]), 10, 64)
		nsec, err2 := strconv.ParseInt(string(f[2]), 10, 64)
		if err1 != nil || err2 != nil || sec < -1<<40 || sec > 1<<40 || nsec < 0 || nsec >= 1e9 {
			return 0
		}
		return sec*userHZ + nsec/(1e9/userHZ)
	}
	return 0
}
