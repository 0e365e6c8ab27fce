//go:build race

package events

// raceEnabled skips the allocation tests: the race detector changes what
// allocates.
const raceEnabled = true
