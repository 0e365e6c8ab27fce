//go:build !race

package proccon

const raceEnabled = false
