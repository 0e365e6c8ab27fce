package local

import (
	"context"
	"os/exec"
	"testing"
)

// TestCmdline reads a live child's command line, and refuses it for a
// token of another instance at the same pid.
func TestCmdline(t *testing.T) {
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
	if got, want := Cmdline(pid, tok), "cat - with spaces"; got != want {
		t.Errorf("Cmdline(%d, its token) = %q, want %q", pid, got, want)
	}
	other := tok
	other.Start++
	if got := Cmdline(pid, other); got != "" {
		t.Errorf("Cmdline(%d, another instance's token) = %q, want \"\"", pid, got)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := Cmdline(pid, tok); got != "" {
		t.Errorf("Cmdline(%d) after its exit = %q, want \"\"", pid, got)
	}
}
