//go:build !race

package logfeed

const raceEnabled = false
