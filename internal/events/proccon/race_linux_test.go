//go:build race

package proccon

// raceEnabled skips the allocation tests: the race detector changes what
// allocates.
const raceEnabled = true
