package logfeed

import (
	"sync/atomic"
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
)

// userHZ is the unit of start times in /proc/PID/stat (and in ticks
// tokens): USER_HZ is 100 on every Linux architecture.
const userHZ = 100

// resample is how long a sampled boot-time offset is trusted.
const resample = 5 * time.Second

// bootClock converts CLOCK_BOOTTIME readings and start tokens to wall time.
// The offset (wall clock minus boot time) only changes when the wall clock
// is stepped, so it is sampled at most every few seconds.
type bootClock struct {
	offset  atomic.Int64 // wall ns - boottime ns; 0 when unknown
	sampled atomic.Int64 // wall ns of the last sample
}

func (c *bootClock) bootOffset(now time.Time) int64 {
	n := now.UnixNano()
	if n-c.sampled.Load() < int64(resample) {
		return c.offset.Load()
	}
	c.sampled.Store(n)
	boot, ok := boottimeNow()
	if !ok {
		return 0
	}
	off := time.Now().UnixNano() - boot
	c.offset.Store(off)
	return off
}

// eventTime returns the wall time of an event stamped with nanoseconds of
// CLOCK_BOOTTIME, or now when the stamp is 0 or cannot be converted.
func (c *bootClock) eventTime(boottime uint64) time.Time {
	now := time.Now()
	if boottime == 0 {
		return now
	}
	off := c.bootOffset(now)
	if off == 0 {
		return now
	}
	return time.Unix(0, off+int64(boottime))
}

// startTime returns the wall time a token says its process started.
func (c *bootClock) startTime(t token.Token) (time.Time, bool) {
	switch t.Prec {
	case token.Micro:
		return time.UnixMicro(int64(t.Start)), true
	case token.Second:
		return time.Unix(int64(t.Start), 0), true
	case token.Ticks:
		off := c.bootOffset(time.Now())
		if off == 0 {
			return time.Time{}, false
		}
		return time.Unix(0, off+int64(t.Start)*(int64(time.Second)/userHZ)), true
	}
	return time.Time{}, false
}

// appendTime appends t as a quoted JSON string in RFC 3339 form, UTC, with
// microseconds (the precision RFC 5424 allows as well).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	return append(b, '"')
}
