package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationLaunchCallersUmaskAndNice: a job launched for a user has
// its caller's umask and, where it is not more favourable than the
// daemon's, its nice value. Before, it had the daemon's (umask 0022, nice
// 0): a user with umask 077 wrote a file others could read, and one set
// to nice 15 (RLIMIT_NICE 0: it cannot renice back) ran its jobs at 0.
func TestIntegrationLaunchCallersUmaskAndNice(t *testing.T) {
	h := newHarness(t)
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := 20 - prio // the daemon's (the shim forks from its threads)
	if own > 10 {
		testenv.Skip(t, "the test runs at nice %d: a caller at a higher one cannot be told from the daemon's", own)
	}
	dir := testenv.ReachableDir(t, 0o777)
	tests := []struct {
		name     string
		umask    string // the caller's, given to its shell
		nice     int    // the caller's, set by the test (root)
		wantMode os.FileMode
		wantNice int
	}{
		{"umask 077 at nice 15", "077", 15, 0o600, 15},
		{"umask 022 at nice 0", "022", 0, 0o644, max(own, 0)},
		{"umask 027 at nice 19", "027", 19, 0o640, 19},
		{"umask 002 at nice -5, more favourable than the daemon's", "002", -5, 0o664, own},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The caller: a shell that sets its umask and becomes sleep.
			caller := exec.Command("/bin/sh", "-c", "umask "+tt.umask+"; exec /bin/sleep 600")
			caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			pid := startCaller(t, caller)
			if err := unix.Setpriority(unix.PRIO_PROCESS, pid, tt.nice); err != nil {
				t.Fatal(err)
			}

			file := filepath.Join(dir, strconv.Itoa(i))
			p := api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)}
			cl := launchSleeper(t, h, p, "/bin/sh", "-c", "echo secret > "+file+"; exec /bin/sleep 600")
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.wantMode {
				t.Errorf("a caller with umask %s launched a job whose file is mode %#o, want %#o", tt.umask, got, tt.wantMode)
			}
			if got := statNice(t, cl.Pid); got != tt.wantNice {
				t.Errorf("a caller at nice %d launched a job at nice %d, want %d (the daemon's is %d)", tt.nice, got, tt.wantNice, own)
			}
			if s := cl.Started; s == nil || s.Umask != "0"+tt.umask || s.Nice != tt.wantNice {
				t.Errorf("the claim says the job started with %+v, want umask 0%s, nice %d", s, tt.umask, tt.wantNice)
			}
		})
	}
}

// startCaller starts the caller of a launch, a shell that ends by
// exec'ing sleep, and returns its pid once it is sleep (its set-up done);
// it is killed when the test ends.
func startCaller(t *testing.T, caller *exec.Cmd) int {
	t.Helper()
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caller.Process.Kill(); caller.Wait() })
	pid := caller.Process.Pid
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return string(b) == "sleep\n"
	}, "the caller did not exec sleep")
	return pid
}

// launchSleeper launches argv for peer p, argv ending by exec'ing sleep,
// and returns its claim once the job is sleep; the job is killed when
// the test ends.
func launchSleeper(t *testing.T, h *harness, p api.Peer, argv ...string) api.Claim {
	t.Helper()
	cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: argv, Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(int(cl.Pid), syscall.SIGKILL) })
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cl.Pid))
		return string(b) == "sleep\n"
	}, "the job did not exec sleep")
	return cl
}

// statNice reads the nice value of process pid.
func statNice(t *testing.T, pid int32) int {
	t.Helper()
	n, err := niceOf(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatusUmask: the umask of a status, or 0077 where it has none (a
// kernel before 4.7) or one that does not parse: never the daemon's own.
func TestStatusUmask(t *testing.T) {
	tests := []struct {
		status string
		want   uint32
	}{
		{"Name:\tsh\nUmask:\t0077\nState:\tS (sleeping)\n", 0o077},
		{"Name:\tsh\nUmask:\t0022\n", 0o022},
		{"Name:\tsh\nUmask:\t0000\n", 0},
		{"Name:\tsh\nState:\tS (sleeping)\n", 0o077},
		{"Name:\tsh\nUmask:\t0x22\n", 0o077},
		{"Name:\tsh\nUmask:\t01777\n", 0o077},
		{"Name:\tsh\nUmask:\n", 0o077},
		{"", 0o077},
	}
	for _, tt := range tests {
		if got := statusUmask([]byte(tt.status)); got != tt.want {
			t.Errorf("statusUmask(%q) = %#o, want %#o", tt.status, got, tt.want)
		}
	}
}
