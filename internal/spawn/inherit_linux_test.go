package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationShimNoSetuidFixup: a daemon thread with the securebit
// SECBIT_NO_SETUID_FIXUP does not hand root's capabilities to a job of
// another user. The bit made the change of uid keep every capability, and
// the shim exec'd with them: a program only root may execute ran, where
// the user's own exec was refused. A thread whose bit cannot be cleared
// (no CAP_SETPCAP in its bounding set) fails the launch.
func TestIntegrationShimNoSetuidFixup(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rootOnly := filepath.Join(dir, "root-only")
	if err := os.WriteFile(rootOnly, []byte("#!/bin/sh\necho ran\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	noFixup := func() error {
		return unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoSetuidFixup, 0, 0, 0)
	}
	t.Run("cleared", func(t *testing.T) {
		out, err := fromThreadErr(t, noFixup, Spec{Argv: []string{rootOnly}})
		var ee *ExecError
		if !errors.As(err, &ee) || !strings.Contains(ee.Reason, "permission denied") {
			t.Errorf("a job of uid %d ran %s, mode 0700 root's: %v, output %q; want permission denied", nobody, rootOnly, err, out)
		}
	})
	t.Run("cleared beside a locked setting", func(t *testing.T) {
		// no-cap-ambient-raise, locked: writing every setting clear
		// was refused whole, and every launch failed.
		out, err := fromThreadErr(t, func() error {
			return unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoSetuidFixup|secbitNoAmbient|secbitNoAmbient<<1, 0, 0, 0)
		}, Spec{Argv: []string{rootOnly}})
		var ee *ExecError
		if !errors.As(err, &ee) || !strings.Contains(ee.Reason, "permission denied") {
			t.Errorf("a job of uid %d from a thread with securebits 0xc4 ran %s: %v, output %q; want permission denied", nobody, rootOnly, err, out)
		}
	})
	t.Run("cannot be cleared", func(t *testing.T) {
		out, err := fromThreadErr(t, func() error {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0, 0, 0); err != nil {
				return err
			}
			return noFixup()
		}, Spec{Argv: []string{rootOnly}})
		if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "no-setuid-fixup") {
			t.Errorf("a job from a thread with no-setuid-fixup it cannot clear: %v, output %q; want a set-up error naming it", err, out)
		}
	})
}

// TestIntegrationShimSignalsAndPersonality: the workload has no blocked
// signal, no ignored one and the default personality, whatever the
// daemon's thread that forked the shim had. exec keeps a blocked or an
// ignored signal and the personality: a daemon started with SIGALRM
// blocked, SIGTTOU ignored or under setarch -R gave them to every job.
func TestIntegrationShimSignalsAndPersonality(t *testing.T) {
	out := fromThread(t, func() error {
		var set unix.Sigset_t
		for _, sig := range []unix.Signal{unix.SIGALRM, unix.SIGPIPE, unix.SIGXCPU} {
			set.Val[(sig-1)/64] |= 1 << ((sig - 1) % 64)
		}
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
			return err
		}
		ign := sigaction{handler: sigIgn}
		if _, _, errno := unix.Syscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGTTOU), uintptr(unsafe.Pointer(&ign)), 0, 8, 0, 0); errno != 0 {
			return errno
		}
		t.Cleanup(func() {
			def := sigaction{handler: sigDfl}
			unix.Syscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGTTOU), uintptr(unsafe.Pointer(&def)), 0, 8, 0, 0)
		})
		const addrNoRandomize = 0x0040000
		if _, _, errno := unix.Syscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0); errno != 0 {
			return errno
		}
		return nil
	}, Spec{Argv: []string{"sh", "-c", `grep -E "^Sig(Blk|Ign):" /proc/self/status; cat /proc/self/personality`}})
	if want := "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n00000000\n"; out != want {
		t.Errorf("workload said\n%s\nwant\n%s", out, want)
	}
}

// TestIntegrationShimCallersSeccomp: a workload started for a caller
// under a seccomp filter runs under it (the shim reads it while root and
// attaches it before it takes the workload's uid), and a caller gone by
// then fails the launch. Before, the workload ran outside it: what the
// caller's filter refused (here mkdir) the workload could do.
func TestIntegrationShimCallersSeccomp(t *testing.T) {
	caller, pidfd := seccompCaller(t, testenv.SeccompDeny)
	dir := testenv.ReachableDir(t, 0o777)
	made := filepath.Join(dir, "made")
	out, err := startFrom(t, Spec{Argv: []string{"sh", "-c", `grep "^Seccomp:" /proc/self/status; mkdir ` + made + ` 2>&1 || true`}, SeccompFrom: caller}, pidfd)
	if err != nil {
		t.Fatalf("workload: %v, output %q", err, out)
	}
	if !strings.HasPrefix(out, "Seccomp:\t2\n") || !strings.Contains(out, "not supported") {
		t.Errorf("workload of a caller under a filter refusing mkdir said %q, want Seccomp 2 and mkdir refused", out)
	}
	if _, err := os.Stat(made); err == nil {
		t.Errorf("the workload made %s, which its caller's filter refuses", made)
	}

	// A pidfd of a process that has exited: the filters read at the pid
	// cannot be shown to be that process's.
	gone := exec.Command("true")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	gfd, err := unix.PidfdOpen(gone.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	gonefd := os.NewFile(uintptr(gfd), "gone")
	defer gonefd.Close()
	gone.Wait()
	out, err = startFrom(t, Spec{Argv: []string{"true"}, SeccompFrom: caller}, gonefd)
	if !errors.Is(err, ErrCaller) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("a launch whose caller's pidfd says it exited: %v, output %q; want the caller's error", err, out)
	}
}

// TestUnlockedSecurebits: the settings that may be cleared are those
// whose lock bit is not set; locked settings and lock bits stay.
func TestUnlockedSecurebits(t *testing.T) {
	tests := []struct{ bits, want int }{
		{0, 0},
		{0x4, 0},
		{0x15, 0},
		{0xc4, 0xc0},
		{0x0c, 0x0c},
		{0x2f, 0x2f},
		{0x1e, 0x0e},
		{0xff, 0xff},
		{0x08, 0x08},
	}
	for _, tt := range tests {
		if got := unlockedSecurebits(tt.bits); got != tt.want {
			t.Errorf("unlockedSecurebits(%#x) = %#x, want %#x", tt.bits, got, tt.want)
		}
	}
}

// TestIntegrationShimResetsInherited: the workload has the kernel's
// default timer slack, transparent huge pages and memory policy, and the
// caller's coredump_filter, whatever the daemon's thread that forked the
// shim had. exec keeps all four: a daemon bound to a NUMA node, or with
// huge pages disabled, passed that to every job.
func TestIntegrationShimResetsInherited(t *testing.T) {
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_THP_DISABLE, 0, 0, 0, 0) })
	filter := uint32(0x23)
	out := fromThread(t, func() error {
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 123456, 0, 0, 0); err != nil {
			return err
		}
		if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
			return err
		}
		node0 := uint64(1)
		const mpolBind = 2
		if _, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolBind, uintptr(unsafe.Pointer(&node0)), 64); errno != 0 {
			return fmt.Errorf("set_mempolicy: %w", errno)
		}
		return nil
	}, Spec{Argv: []string{"sh", "-c", `grep "^THP_enabled:" /proc/self/status; cat /proc/self/timerslack_ns; cut -d" " -f2 /proc/self/numa_maps | head -1; cat /proc/self/coredump_filter`},
		CoredumpFilter: &filter})
	if want := "THP_enabled:\t1\n50000\ndefault\n00000023\n"; out != want {
		t.Errorf("workload said\n%s\nwant\n%s", out, want)
	}
}

// TestIntegrationShimCallersFilterCannotKeepRoot: a caller's filter that
// answers 0 for the calls that take root away, without running them, does
// not leave the workload root's: the filters are attached only once the
// shim is the user's alone. Attached while it was root's, the filter made
// setresuid a no-op on the thread that execs, and a review's job ran as
// uid 0 with every capability (it read /etc/shadow).
func TestIntegrationShimCallersFilterCannotKeepRoot(t *testing.T) {
	caller, pidfd := seccompCaller(t, testenv.SeccompFake)
	out, err := startFrom(t, Spec{Argv: []string{"grep", "-E", "^(Uid|Gid|CapPrm|CapEff|NoNewPrivs|Seccomp):", "/proc/self/status"}, SeccompFrom: caller}, pidfd)
	if err != nil {
		t.Fatalf("workload: %v, output %q", err, out)
	}
	want := fmt.Sprintf("Uid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\nGid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n", nobody)
	if out != want {
		t.Errorf("workload of a caller whose filter fakes the drop from root said\n%s\nwant\n%s", out, want)
	}
}

// TestIntegrationShimCallersFilterRefusesSeccomp: a caller whose own
// filter refuses seccomp(2) makes the shim's attach of its next filter
// fail: the caller's doing (ErrCaller), not the daemon's (ErrSetup).
func TestIntegrationShimCallersFilterRefusesSeccomp(t *testing.T) {
	caller, pidfd := seccompCaller(t, testenv.SeccompNoSeccomp)
	out, err := startFrom(t, Spec{Argv: []string{"true"}, SeccompFrom: caller}, pidfd)
	if !errors.Is(err, ErrCaller) || errors.Is(err, ErrSetup) {
		t.Errorf("a caller whose filter refuses seccomp(2): %v, output %q; want the caller's error", err, out)
	}
}

// seccompCaller starts a caller of uid nobody in seccomp mode mode
// (testenv.SeccompCaller) and returns its pid and a pidfd of it, closed
// when the test ends.
func seccompCaller(t *testing.T, mode string) (int, *os.File) {
	t.Helper()
	caller := testenv.SeccompCaller(t, nobody, nobody, mode)
	fd, err := unix.PidfdOpen(caller, 0)
	if err != nil {
		t.Fatal(err)
	}
	pidfd := os.NewFile(uintptr(fd), "caller")
	t.Cleanup(func() { pidfd.Close() })
	return caller, pidfd
}

// TestIntegrationShimCallersFilterRefusesExec: a caller whose filter
// refuses the exec and every way out gets the exec's error at once, and
// the shim, which cannot exit, is killed: before, its failure returned
// when the exit was refused, and the launch waited out its bound.
func TestIntegrationShimCallersFilterRefusesExec(t *testing.T) {
	caller, pidfd := seccompCaller(t, testenv.SeccompNoExec)
	_, out, ws, err := startWith(t, Spec{Argv: []string{"true"}, SeccompFrom: caller}, "/", pidfd)
	if !errors.Is(err, ErrExec) || !strings.Contains(err.Error(), "operation not permitted") {
		t.Errorf("a caller whose filter refuses the exec and the exit: %v, output %q; want the exec's error", err, out)
	}
	if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
		t.Errorf("the shim ended with %v, want killed by the daemon", ws)
	}
}

// TestIntegrationShimCallersFilterRefusesExit: a caller whose first filter
// refuses seccomp(2) and the exit leaves the shim unable to attach its
// second filter and then to exit. The launch fails as the caller's, and
// the workload never runs: the shim's failure returned when the exit was
// refused, and went on to the exec, so a launch answered 409 ran its
// workload, unclaimed, under the first filter alone (a review's job made
// a directory the second refused).
func TestIntegrationShimCallersFilterRefusesExit(t *testing.T) {
	dir := testenv.ReachableDir(t, 0o777)
	ran := filepath.Join(dir, "ran")
	caller, pidfd := seccompCaller(t, testenv.SeccompNoSeccompExit)
	_, out, ws, err := startWith(t, Spec{Argv: []string{"sh", "-c", "touch " + ran}, SeccompFrom: caller}, "/", pidfd)
	if !errors.Is(err, ErrCaller) {
		t.Errorf("a caller whose filter refuses seccomp(2) and the exit: %v, output %q; want the caller's error", err, out)
	}
	if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
		t.Errorf("the shim ended with %v, want killed by the daemon", ws)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the workload of a failed launch ran")
	}
}
