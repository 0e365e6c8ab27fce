package testenv

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Orphan has a shell fork a subshell that starts a sleeper and exits, and
// returns the sleeper's pid once the shell has exited too: every fork and
// exit of the three happened before Orphan returns, and the sleeper is
// nobody's child any more (its parent gone, it was adopted). The sleeper
// is killed at the test's end.
func Orphan(t testing.TB) int32 {
	t.Helper()
	out, err := exec.Command("sh", "-c", `(sleep 60 >/dev/null 2>&1 & echo $!)`).Output()
	if err != nil {
		t.Fatalf("double fork: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("double fork printed %q: %v", out, err)
	}
	t.Cleanup(func() { syscall.Kill(n, syscall.SIGKILL) })
	return int32(n)
}
