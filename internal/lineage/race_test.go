//go:build race

package lineage

// raceEnabled shortens the longest tests under the race detector, which
// slows the event path tenfold.
const raceEnabled = true
