package testenv

import (
	"os"
	"testing"
)

// TestMain removes what the tests built (testenv.BuildDir) when they end.
func TestMain(m *testing.M) { os.Exit(Main(m)) }
