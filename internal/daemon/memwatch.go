package daemon

// memWatch tells the daemon when to give a storm's memory back. Under a
// storm of process events the heap grows (the exec cache's descriptions,
// the graph's exited nodes, the feed's lines) and the collector, at
// GCPercent, lets it grow to four times what is live; once the storm is
// over nothing allocates, so nothing collects until the runtime's forced
// collection two minutes later, and the pages freed then go back to the
// system slowly. The daemon calls tick with the event count once a
// second; after burstEvents events, the first second with fewer than
// quietEvents is the time to return them (debug.FreeOSMemory: a full
// collection, a few milliseconds, once per storm).
type memWatch struct {
	last  uint64 // the event count at the last tick
	since uint64 // events since memory was last given back
}

const (
	burstEvents = 30_000 // about 10,000 execs: fork, exec and exit each
	quietEvents = 100    // in a second
)

// tick takes the event count so far and reports whether to give memory
// back now.
func (m *memWatch) tick(events uint64) bool {
	d := events - m.last
	if events < m.last { // a new source: count from it
		d = events
	}
	m.last = events
	m.since += d
	if d < quietEvents && m.since >= burstEvents {
		m.since = 0
		return true
	}
	return false
}
