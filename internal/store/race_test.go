//go:build race

package store

// raceEnabled: the race detector slows the re-executed crash writer down.
const raceEnabled = true
