//go:build linux && race

package tracepoint

// raceEnabled skips the allocation tests: the race detector makes calls
// allocate that do not otherwise.
const raceEnabled = true
