// Package testenv holds test support shared by the supervisor's packages:
// the rule that turns a privileged test's skip into a failure in CI, and
// helpers that create real processes (including at a chosen pid, to force
// pid reuse). It is imported only by tests.
package testenv

import (
	"os"
	"testing"
)

// RequireEnv is the environment variable .ci/run sets to 1: a test that
// needs root, eBPF or another kernel feature then fails instead of skipping.
const RequireEnv = "SUPERVISOR_REQUIRE_PRIVILEGED"

// Required reports whether privileged tests must run.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Skip skips the test with the reason, or fails it when privileged tests
// are required.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("required test cannot run ("+RequireEnv+"=1): "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot skips (or fails, see Skip) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root")
	}
}

// ReachableDir makes a directory outside the test's own (t.TempDir's
// parents are root's, mode 0700), with mode perm, that processes of other
// uids can reach, and removes it when the test ends.
func ReachableDir(t testing.TB, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "reach")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}
