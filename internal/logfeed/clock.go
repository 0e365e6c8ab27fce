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
func (c *bootClock) eventTime(now time.Time, boottime uint64) time.Time {
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
func (c *bootClock) startTime(now time.Time, t token.Token) (time.Time, bool) {
	switch t.Prec {
	case token.Micro:
		return time.UnixMicro(int64(t.Start)), true
	case token.Second:
		return time.Unix(int64(t.Start), 0), true
	case token.Ticks:
		off := c.bootOffset(now)
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
	b = appendRFC3339Micro(b, t)
	return append(b, '"')
}

// appendRFC3339Micro appends t as 2006-01-02T15:04:05.000000Z; the same as
// t.UTC().AppendFormat with that layout, a few times faster.
func appendRFC3339Micro(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	}
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

// appendDigits appends v (>= 0) zero-padded to width digits.
func appendDigits(b []byte, v, width int) []byte {
	var d [8]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:width]...)
}
