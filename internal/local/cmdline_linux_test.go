package local

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestArgv reads a live child's arguments, and refuses them for a token
// of another instance at the same pid.
func TestArgv(t *testing.T) {
	cmdline := func(pid int32, tok token.Token) string {
		argv, _ := Argv(pid, tok)
		return strings.Join(argv, " ")
	}
	// cat blocks on its stdin (a pipe kept open) before it reads its file.
	cmd := exec.Command("cat", "-", "with spaces")
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := int32(cmd.Process.Pid)
	tok, err := ReadToken(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	// Start returns once exec closed the descriptors, a moment before the
	// kernel sets up the new arguments (/proc/PID/cmdline reads empty
	// until then).
	want := "cat - with spaces"
	testenv.Eventually(t, 10*time.Second, func() bool { return cmdline(pid, tok) == want },
		"Argv(%d, its token) = %q, want %q", pid, cmdline(pid, tok), want)
	other := tok
	other.Start++
	if got := cmdline(pid, other); got != "" {
		t.Errorf("Argv(%d, another instance's token) = %q, want \"\"", pid, got)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := cmdline(pid, tok); got != "" {
		t.Errorf("Argv(%d) after its exit = %q, want \"\"", pid, got)
	}
}
