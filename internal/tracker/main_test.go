package tracker

import (
	"os"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestMain removes what the tests built (testenv.BuildDir) when they end.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
