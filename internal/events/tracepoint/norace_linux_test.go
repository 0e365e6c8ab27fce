//go:build linux && !race

package tracepoint

const raceEnabled = false
