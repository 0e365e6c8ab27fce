package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationOutputForItsOwner: a job nobody launched prints; nobody
// reads its output through the daemon (whole, and from an offset), root
// reads it too, another user is told there is no such claim, and an
// output file replaced by a symbolic link is not followed.
func TestIntegrationOutputForItsOwner(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	owner := &syscall.Credential{Uid: nobody, Gid: nobody}
	// Another uid in the socket's group (the kernel needs no user entry).
	stranger := &syscall.Credential{Uid: nobody - 1, Gid: nobody}

	code, out, errs := d.run(t, owner, "launch", "--json", "--detach", "--cwd", "/", "--", "sh", "-c", "echo hello from $(id -u); echo to stderr >&2")
	if code != 0 {
		t.Fatalf("launch as nobody: exit %d: %s", code, errs)
	}
	var job api.Claim
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("hello from %d\nto stderr\n", nobody)
	testenv.Eventually(t, 20*time.Second, func() bool {
		code, out, _ = d.run(t, owner, "output", job.ID)
		return code == 0 && out == want
	}, "nobody's output of its job: exit %d %q, want %q", code, out, want)

	if code, out, errs := d.run(t, owner, "output", "--offset", "6", job.ID); code != 0 || out != want[6:] {
		t.Errorf("output --offset 6 = %d %q %q, want %q", code, out, errs, want[6:])
	}
	if code, out, errs := d.run(t, owner, "output", "--offset", "1000", job.ID); code != 0 || out != "" {
		t.Errorf("output past the end = %d %q %q, want nothing", code, out, errs)
	}
	if code, out, errs := d.run(t, nil, "output", job.ID); code != 0 || out != want {
		t.Errorf("root's output = %d %q %q, want %q", code, out, errs, want)
	}
	if code, out, errs := d.run(t, stranger, "output", job.ID); code != exitNoProcess || out != "" || !strings.Contains(errs, "not found") {
		t.Errorf("another user's output = %d %q %q, want exit %d, not found", code, out, errs, exitNoProcess)
	}
	// Nor by the file's name (STATE_DIR/jobs is 0711, and the id is in the
	// job's /proc/PID/cgroup): the stranger shares nobody's group, which
	// could read it while the file was 0640.
	if err := os.Chmod(d.state, 0o711); err != nil { // as the packaged unit makes it
		t.Fatal(err)
	}
	cat := exec.Command("cat", job.OutputPath)
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: stranger}
	if b, err := cat.CombinedOutput(); err == nil || strings.Contains(string(b), "hello") {
		t.Errorf("another user in the job user's group read %s: %q (%v)", job.OutputPath, b, err)
	}
	owned := exec.Command("cat", job.OutputPath)
	owned.SysProcAttr = &syscall.SysProcAttr{Credential: owner}
	if b, err := owned.Output(); err != nil || string(b) != want {
		t.Errorf("the job's user reading %s by name: %q (%v), want %q", job.OutputPath, b, err, want)
	}

	// The file is the job's: if it becomes a link to a file the owner may
	// not read, the daemon does not follow it.
	secret := "root only\n"
	sf := d.state + "/secret"
	if err := os.WriteFile(sf, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(job.OutputPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sf, job.OutputPath); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := d.run(t, owner, "output", job.ID); code == 0 || strings.Contains(out, "root only") {
		t.Errorf("output through a symbolic link = %d %q %q, want refused", code, out, errs)
	}
}
