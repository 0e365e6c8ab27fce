package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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

// TestIntegrationRunForcedMechanismCannotRun starts the daemon as a user
// without CAP_BPF with eBPF forced: it refuses to start, saying why, and
// exits 69 like `events` (70 was the code of any other failure).
func TestIntegrationRunForcedMechanismCannotRun(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	os.Chown(filepath.Dir(sock), 65534, 65534) // the daemon's, as its socket directory must be
	cmd := exec.Command(binary(t), "run", "--mechanism", "ebpf", "--state-dir", state, "--socket", sock,
		"--log-output", "file:"+filepath.Join(filepath.Dir(sock), "log.json"), "--cgroup", "off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUnavailable || !strings.Contains(errb.String(), "CAP_BPF") {
		t.Fatalf("run --mechanism ebpf as nobody: %v, stderr %q; want exit %d naming the missing capability", err, errb.String(), exitUnavailable)
	}
}
