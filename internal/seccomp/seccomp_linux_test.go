package seccomp

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// onThread runs f on a locked thread that is never unlocked, and not the
// process's main thread: the runtime ends it with its goroutine (it
// would keep the main thread), so a thread given a filter or made a
// tracer is gone once f has returned.
func onThread(f func() error) error {
	done := make(chan error, 1)
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			go run() // another thread: this one is held
			runtime.UnlockOSThread()
			return
		}
		done <- f()
	}
	go run()
	return <-done
}

// always is a Read's check that pid is still the process meant, for a
// process the test holds.
func always() bool { return true }

// state returns the state letter of process pid.
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// TestIntegrationReadInstall: the filters of a real process are read
// whole, the process goes on as it was (not left stopped), and the copy
// attached to another thread refuses what the original refuses.
func TestIntegrationReadInstall(t *testing.T) {
	pid := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompDeny)
	var fs []Filter
	if err := onThread(func() (err error) { fs, err = Read(pid, always); return err }); err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || len(fs[0]) != 5 {
		t.Fatalf("read %d filters (%v), want the helper's one of 5 instructions", len(fs), fs)
	}
	if last := fs[0][4]; last.K != unix.SECCOMP_RET_ERRNO|uint32(unix.EOPNOTSUPP) {
		t.Errorf("the filter's last instruction returns %#x, want ERRNO(EOPNOTSUPP)", last.K)
	}
	// Woken by the stop, it goes back to its read: asleep again, never
	// left stopped (t).
	testenv.Eventually(t, 10*time.Second, func() bool { return state(t, pid) == "S" },
		"the process read did not go back to sleep (S) after the read")
	dir := filepath.Join(t.TempDir(), "made")
	err := onThread(func() error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
		if err := Install(fs); err != nil {
			return err
		}
		return unix.Mkdir(dir, 0o700)
	})
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("mkdir under the copied filter: %v, want EOPNOTSUPP", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Errorf("mkdir on a thread without the filter: %v", err)
	}
}

// TestIntegrationReadNoFilter: a process without filters has none, and
// one that another tracer holds cannot be read (ErrUnreadable).
func TestIntegrationReadNoFilter(t *testing.T) {
	testenv.RequireRoot(t)
	pid := testenv.Orphan(t)
	var fs []Filter
	if err := onThread(func() (err error) { fs, err = Read(int(pid), always); return err }); err != nil || len(fs) != 0 {
		t.Fatalf("Read of a process without filters: %v, %v; want none", fs, err)
	}
	caller := testenv.SeccompCaller(t, -1, -1, testenv.SeccompDeny)
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread() // the tracer's thread; never unlocked
		if err := unix.PtraceSeize(caller); err != nil {
			t.Errorf("seize: %v", err)
		}
		close(held)
		<-release
		unix.PtraceDetach(caller)
	}()
	<-held
	err := onThread(func() (err error) { _, err = Read(caller, always); return err })
	close(release)
	if !errors.Is(err, ErrUnreadable) {
		t.Errorf("Read of a process another tracer holds: %v, want ErrUnreadable", err)
	}
}

// TestDedupe: a filter equal to an earlier one is dropped, the order of
// the rest kept.
func TestDedupe(t *testing.T) {
	a := Filter{{Code: 6, K: 1}}
	b := Filter{{Code: 6, K: 2}}
	c := Filter{{Code: 6, K: 1}, {Code: 6, K: 2}}
	tests := []struct {
		in, want []Filter
	}{
		{nil, nil},
		{[]Filter{a}, []Filter{a}},
		{[]Filter{a, a}, []Filter{a}},
		{[]Filter{a, b, a, c, b}, []Filter{a, b, c}},
		{[]Filter{b, a}, []Filter{b, a}},
	}
	for _, tt := range tests {
		got := Dedupe(tt.in)
		if len(got) != len(tt.want) {
			t.Errorf("Dedupe(%v) = %v, want %v", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if !slices.Equal(got[i], tt.want[i]) {
				t.Errorf("Dedupe(%v) = %v, want %v", tt.in, got, tt.want)
				break
			}
		}
	}
}

// TestIntegrationReadNotOurs: a pid that is no longer the process meant
// once seized is let go before it is stopped.
func TestIntegrationReadNotOurs(t *testing.T) {
	pid := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompDeny)
	asked := false
	err := onThread(func() (err error) {
		_, err = Read(pid, func() bool { asked = true; return false })
		return err
	})
	if !errors.Is(err, ErrUnreadable) || !asked {
		t.Fatalf("Read of a pid that is not the process meant: %v (asked %v), want ErrUnreadable", err, asked)
	}
	// Seized, never stopped: let go when the tracer's thread ends.
	untraced(t, pid)
	if s := state(t, pid); s != "S" {
		t.Errorf("the process let go is in state %s, want S", s)
	}
}

// untraced waits for process pid to have no tracer.
func untraced(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		return strings.Contains(string(b), "\nTracerPid:\t0\n")
	}, "process %d is still traced after its tracer's thread ended", pid)
}

// TestIntegrationReadNoStop: a process that cannot stop (in
// uninterruptible sleep, waiting on a vfork child) fails the read within
// its bound, and is let go once the tracer's thread ends.
func TestIntegrationReadNoStop(t *testing.T) {
	pid := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompVfork)
	testenv.Eventually(t, 10*time.Second, func() bool { return state(t, pid) == "D" }, "the caller never waited on its vfork child")
	t.Cleanup(func() {
		// The vfork child: killed with its parent's test.
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				unix.Kill(c, unix.SIGKILL)
			}
		}
	})
	err := onThread(func() (err error) { _, err = Read(pid, always); return err })
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "did not stop") {
		t.Fatalf("Read of a process in uninterruptible sleep: %v, want ErrUnreadable (did not stop)", err)
	}
	untraced(t, pid)
}
