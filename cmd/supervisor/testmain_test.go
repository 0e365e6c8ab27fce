package main

import (
	"os"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestMain removes what the tests built (the supervisor binary, the
// testenv helpers) when they end. With SUPERVISOR_TIMENS_HELPER set the
// binary is a helper process instead (timensHelper), and runs no test.
func TestMain(m *testing.M) {
	if offsets := os.Getenv("SUPERVISOR_TIMENS_HELPER"); offsets != "" {
		timensHelper(offsets)
	}
	os.Exit(testenv.Main(m))
}
