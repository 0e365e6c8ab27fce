// Package boottime converts stamps of CLOCK_BOOTTIME, the clock the
// kernel's process events are stamped with (eBPF records read it, the proc
// connector's monotonic stamps are moved onto it, tick tokens count from
// boot), to wall-clock time.
//
// The offset between the two clocks (wall ns minus boot ns) moves only when
// the wall clock is stepped or slewed, so a Clock samples it at most every
// Resample and converts with the sample: a stamp becomes the wall time it
// had under the offset of the last few seconds. A wall clock stepped since
// shows in the conversions within Resample. CLOCK_BOOTTIME is read with a
// raw system call, which the Go runtime does not see: it never blocks, and
// a call through the runtime's system call path wakes its sleeping sysmon
// thread, which then ticks every 20 µs while the event path is busy.
//
// Outside Linux there is no CLOCK_BOOTTIME to read: the offset is unknown
// and every conversion (At) gives the time of the call.
package boottime

import (
	"math"
	"sync/atomic"
	"time"
)

// Resample is how long a sampled offset is trusted.
const Resample = 5 * time.Second

// Clock converts boot-time stamps to wall time. The zero value is ready;
// it is safe for concurrent use.
type Clock struct {
	offset  atomic.Int64 // wall ns - boot ns; 0 when unknown
	sampled atomic.Int64 // wall ns of the last sample
	// sampledBoot is the boot ns of the last sample, 0 before the first.
	sampledBoot atomic.Int64
}

// Offset returns wall ns minus boot ns as sampled within Resample of now,
// or 0 when CLOCK_BOOTTIME cannot be read.
func (c *Clock) Offset(now time.Time) int64 {
	n := now.UnixNano()
	if n-c.sampled.Load() < int64(Resample) {
		return c.offset.Load()
	}
	c.sampled.Store(n)
	off, _, _ := c.sample()
	return off
}

// sample reads both clocks and keeps their offset: it returns the offset
// and the wall ns read, or false when CLOCK_BOOTTIME cannot be read.
func (c *Clock) sample() (off, wall int64, ok bool) {
	boot, ok := Now()
	if !ok {
		return 0, 0, false
	}
	wall = time.Now().UnixNano()
	off = wall - boot
	c.offset.Store(off)
	c.sampledBoot.Store(boot)
	return off, wall, true
}

// Stamped returns the wall time of stamp (ns of CLOCK_BOOTTIME) without
// reading a clock when it can: the offset of the last sample converts
// every stamp up to Resample after that sample was taken (an earlier stamp
// too: a backlog is converted with the newer offset), and a later stamp
// takes a new sample, which then serves the stamps that follow. A stream
// of events is so converted with one pair of clock reads every Resample
// of its own time. false for a zero stamp, or when CLOCK_BOOTTIME cannot
// be read.
func (c *Clock) Stamped(stamp uint64) (time.Time, bool) {
	if stamp == 0 {
		return time.Time{}, false
	}
	off := c.offset.Load()
	if sb := c.sampledBoot.Load(); sb == 0 || int64(stamp)-sb >= int64(Resample) {
		if c.sampled.Load() != math.MaxInt64 { // not pinned
			var wall int64
			var ok bool
			if off, wall, ok = c.sample(); !ok {
				return time.Time{}, false
			}
			c.sampled.Store(wall)
		}
	}
	if off == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, off+int64(stamp)), true
}

// At returns the wall time of an event stamped stamp (ns of
// CLOCK_BOOTTIME) as Stamped converts it, or the time of the call when the
// stamp is 0 (the mechanism gave none) or the offset is unknown: the
// time every line and record of an event carries.
func (c *Clock) At(stamp uint64) time.Time {
	if t, ok := c.Stamped(stamp); ok {
		return t
	}
	return time.Now()
}

// Pin makes c convert with offset (wall ns minus boot ns) from now on,
// never sampling again: for a replay, or a test that must convert a stamp
// the same way twice.
func (c *Clock) Pin(offset int64) {
	c.offset.Store(offset)
	c.sampled.Store(math.MaxInt64)
}
