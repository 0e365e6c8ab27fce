package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationForcedMechanismCannotRun forces eBPF as a user without
// CAP_BPF: an error that says why, exit 69, and no event stream.
func TestIntegrationForcedMechanismCannotRun(t *testing.T) {
	testenv.RequireRoot(t)
	cmd := exec.Command(binary(t), "events", "--mechanism", "ebpf")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUnavailable {
		t.Fatalf("events --mechanism ebpf as nobody: %v, want exit %d", err, exitUnavailable)
	}
	if !strings.Contains(errb.String(), "CAP_BPF") || out.Len() != 0 {
		t.Errorf("stdout %q, stderr %q: want nothing printed and the missing capability named", out.String(), errb.String())
	}
	if code, _, errs := cli(t, "events", "--mechanism", "carrier-pigeon"); code != exitUsage || !strings.Contains(errs, "unknown mechanism") {
		t.Errorf("events --mechanism carrier-pigeon = %d %q, want %d naming the unknown mechanism", code, errs, exitUsage)
	}
}
