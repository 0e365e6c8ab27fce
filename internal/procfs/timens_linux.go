package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// userHZ is the unit of the start times /proc shows (USER_HZ: 100 on
// every Linux architecture the daemon builds for).
const userHZ = 100

// bootOffsetTicks is the boot-time offset of this process's time
// namespace (/proc/self/timens_offsets, Linux 5.6), in clock ticks, and
// whether it is a whole number of them. The kernel adds it to every
// start time /proc shows a reader in that namespace (`unshare --time
// --boottime N`), so ParseStat takes it out: a start time then reads as
// the host's, as eBPF and every reader outside sees it, and a token read
// in a time namespace names the same instance. An offset that is not a
// whole number of ticks (10 ms; CRIU restores with such offsets) cannot
// be taken out exactly (the kernel adds before it divides: a start time
// can be off by one tick either way), so ParseStat then refuses start
// times (ErrTimeNamespace) rather than give a wrong one. It is read
// once: a process cannot change its own time namespace but by setns,
// which a multithreaded program may not do. 0 and exact outside a time
// namespace, or where the file cannot be read.
var bootOffsetTicks = sync.OnceValues(func() (int64, bool) {
	b, err := os.ReadFile("/proc/self/timens_offsets")
	if err != nil {
		return 0, true
	}
	return ParseBootOffset(b)
})

// ParseBootOffset reads the boottime line of a timens_offsets file
// ("boottime <seconds> <nanoseconds>") as clock ticks, and whether the
// offset is a whole number of them; 0 and exact when it has none.
func ParseBootOffset(b []byte) (ticks int64, exact bool) {
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[0]) != "boottime" && string(f[0]) != "7" { // CLOCK_BOOTTIME is 7
			continue
		}
		sec, err1 := strconv.ParseInt(string(f[1]), 10, 64)
		nsec, err2 := strconv.ParseInt(string(f[2]), 10, 64)
		if err1 != nil || err2 != nil || sec < -1<<40 || sec > 1<<40 || nsec < 0 || nsec >= 1e9 {
			return 0, false
		}
		const tick = 1e9 / userHZ
		return sec*userHZ + nsec/tick, nsec%tick == 0
	}
	return 0, true
}

// CheckTimeNamespace returns ErrTimeNamespace when this process's time
// namespace has a boot-time offset that is not a whole number of clock
// ticks: no start time can be read exactly here.
func CheckTimeNamespace() error {
	if _, exact := bootOffsetTicks(); !exact {
		return fmt.Errorf("/proc/self/timens_offsets: %w", ErrTimeNamespace)
	}
	return nil
}
