package actions

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationSignallerNotSignallable: while a thread of the daemon
// signals with nobody's rights, nobody must not be able to signal that
// thread: a SIGSTOP or SIGKILL of it stops or kills the whole daemon. The
// thread had nobody's real and saved uids, and nobody's tgkill of it
// succeeded. It must still signal nobody's process and not root's, and
// every thread must be root's again afterwards.
func TestIntegrationSignallerNotSignallable(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("perl"); err != nil {
		testenv.Skip(t, "no perl to call tgkill as nobody")
	}
	const nobody = 65534
	target := exec.Command("sleep", "1000")
	target.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill(); target.Wait() })
	rootOwned := testenv.Start(t, "sleep", "1000")
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	h, err := pidfd.Open(int32(target.Process.Pid), boot)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hr, err := pidfd.Open(int32(rootOwned.Process.Pid), boot)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Close()

	loans := 0
	onLoan = func(tid int) {
		loans++
		status, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		if err != nil {
			t.Error(err)
			return
		}
		uids, _ := procfs.LineValue(status, "Uid:")
		f := strings.Fields(string(uids))
		if len(f) != 4 || f[0] == fmt.Sprint(nobody) || f[1] != fmt.Sprint(nobody) || f[2] == fmt.Sprint(nobody) {
			t.Errorf("the signalling thread's uids (real, effective, saved, fs) = %q: want nobody's effective uid alone", uids)
		}
		// nobody's tgkill(pid, tid, 0): permission alone, no signal sent.
		// Probed from another thread: a child forked from this one would
		// start with its uids.
		probed := make(chan error)
		go func() {
			probed <- exec.Command("setpriv", "--reuid", fmt.Sprint(nobody), "--regid", fmt.Sprint(nobody), "--clear-groups",
				"perl", "-e", fmt.Sprintf("exit(syscall(%d, %d, %d, 0) == 0 ? 0 : 1)", unix.SYS_TGKILL, os.Getpid(), tid)).Run()
		}()
		if err := <-probed; err == nil {
			t.Errorf("nobody may signal the thread %d that signals for it", tid)
		} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("probing the thread as nobody: %v", err)
		}
	}
	defer func() { onLoan = nil }()

	errs := signalAs(nobody, []*pidfd.Handle{h, hr}, 0)
	if loans != 1 {
		t.Fatalf("the hook ran %d times, want 1", loans)
	}
	if errs[0] != nil {
		t.Errorf("signal 0 to nobody's process with nobody's rights: %v", errs[0])
	}
	if !errors.Is(errs[1], unix.EPERM) {
		t.Errorf("signal 0 to root's process with nobody's rights: %v, want EPERM", errs[1])
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	caps, _ := procfs.LineValue(main, "CapEff:")
	for _, path := range tasks {
		status, err := os.ReadFile(path)
		if err != nil {
			continue // a thread that ended
		}
		if uids, _ := procfs.LineValue(status, "Uid:"); strings.Join(strings.Fields(string(uids)), " ") != "0 0 0 0" {
			t.Errorf("%s: uids %q after the signals, want root's", path, uids)
		}
		if c, _ := procfs.LineValue(status, "CapEff:"); string(c) != string(caps) {
			t.Errorf("%s: effective capabilities %q after the signals, want the process's %q", path, c, caps)
		}
	}
}
