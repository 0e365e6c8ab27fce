package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSetuidHelperNeedsItsBuilder: the setuid helper runs only while the
// process it was built for runs. A copy bound to a process that has ended
// (what a killed test run leaves behind) exits 77 without becoming root,
// even for root; the helper bound to this test binary runs as nobody and
// makes it root.
func TestSetuidHelperNeedsItsBuilder(t *testing.T) {
	RequireRoot(t)
	live := SetuidRoot(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	cmd := exec.Command(live, "exec", "/usr/bin/id", "-u")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	out, err := cmd.Output()
	if err != nil || string(out) != "0\n" {
		t.Fatalf("the live helper as nobody: id -u said %q, %v; want 0", out, err)
	}

	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pid := gone.Process.Pid
	start := startTime(os.Getpid()) // any start time: the pid has no process now, or another one
	bin, err := compile("setuid-stale", setuidSource,
		fmt.Sprintf("-DOWNER_PID=%d", pid), fmt.Sprintf("-DOWNER_START=%dULL", start))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	for _, cred := range []*syscall.Credential{nil, nobody} {
		cmd := exec.Command(bin, "exec", "/usr/bin/id", "-u")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 77 || len(out) != 0 {
			t.Errorf("a helper whose builder has ended (as %v): out %q, err %v; want exit 77 and no output", cred, out, err)
		}
	}
}

// TestSweepStale: build directories of ended test binaries are removed,
// those of live ones (this one) and names that are no build directory's
// are kept.
func TestSweepStale(t *testing.T) {
	mine, err := buildDir()
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%d-", buildPrefix, gone.Process.Pid, startTime(os.Getpid())+1))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "setuid"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	odd, err := os.MkdirTemp("", buildPrefix+"x-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(odd); os.RemoveAll(stale) })

	sweepStale()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s (its process has ended) survived the sweep: %v", stale, err)
	}
	for _, keep := range []string{mine, odd} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed by the sweep: %v", keep, err)
		}
	}
}
