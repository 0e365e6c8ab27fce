package main

import (
	"os"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestMain removes what the tests built (the supervisor binary, the
// testenv helpers) when they end.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
