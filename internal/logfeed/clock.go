package logfeed

import (
	"time"

	"github.com/procsupervisor/supervisor/internal/boottime"
	"github.com/procsupervisor/supervisor/internal/token"
)

// userHZ is the unit of start times in /proc/PID/stat (and in ticks
// tokens): USER_HZ is 100 on every Linux architecture.
const userHZ = 100

// startTime returns the wall time a token says its process started (c
// converts a tick token's start, counted from boot).
func startTime(c *boottime.Clock, now time.Time, t token.Token) (time.Time, bool) {
	switch t.Prec {
	case token.Micro:
		return time.UnixMicro(int64(t.Start)), true
	case token.Second:
		return time.Unix(int64(t.Start), 0), true
	case token.Ticks:
		off := c.Offset(now)
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
