package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestIntegrationLaunchCallersSeccomp: a job launched for a caller under
// a seccomp filter runs under that filter, and a caller in seccomp's
// strict mode is refused. Before, the job ran outside the filter: a
// container's process, whose profile refuses a call, launched a job that
// made it (here mkdir, which the caller's filter refuses).
func TestIntegrationLaunchCallersSeccomp(t *testing.T) {
	h := newHarness(t)
	dir := testenv.ReachableDir(t, 0o777)
	made, said := filepath.Join(dir, "made"), filepath.Join(dir, "said")

	pid := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompDeny)
	p := api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)}
	cl := launchSleeper(t, h, p, "/bin/sh", "-c", "mkdir "+made+" 2> "+said+"; exec /bin/sleep 600")
	if _, err := os.Stat(made); err == nil {
		t.Errorf("the job made %s, which its caller's seccomp filter refuses", made)
	}
	if b, _ := os.ReadFile(said); !strings.Contains(string(b), "not supported") {
		t.Errorf("the job's mkdir said %q, want the caller's filter's EOPNOTSUPP", b)
	}
	if cl.Started == nil || cl.Started.SeccompFilters != 1 {
		t.Errorf("the claim says the job started with %+v, want its caller's one seccomp filter", cl.Started)
	}

	strict := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompStrict)
	_, err := h.d.Launch(context.Background(), api.Peer{UID: 65534, GID: 65534, Pid: int32(strict)},
		&api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"})
	if !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "strict") {
		t.Errorf("a launch for a caller in seccomp's strict mode: %v, want forbidden", err)
	}
}

// TestIntegrationLaunchCallersFilterCannotKeepRoot: through the daemon, a
// caller whose filter answers 0 for setresuid and the other calls that
// take root away gets a job of its own uid, without capabilities, with
// no_new_privs on its claim.
func TestIntegrationLaunchCallersFilterCannotKeepRoot(t *testing.T) {
	h := newHarness(t)
	pid := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompFake)
	cl := launchSleeper(t, h, api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)}, "/bin/sleep", "600")
	if got := statusLine(t, int(cl.Pid), "Uid:"); got != "65534\t65534\t65534\t65534" {
		t.Errorf("the job's uids are %q, want 65534's alone", got)
	}
	if got := statusLine(t, int(cl.Pid), "CapEff:"); got != "0000000000000000" {
		t.Errorf("the job's effective capabilities are %s, want none", got)
	}
	if !cl.NoNewPrivs {
		t.Errorf("the claim of a job under its caller's filters does not say no_new_privs")
	}
}

// TestIntegrationLaunchCallersFilterUnreadable: a caller under a filter
// that another tracer holds cannot have its filters read, and is told so
// as its own state (409), not as the daemon's failure.
func TestIntegrationLaunchCallersFilterUnreadable(t *testing.T) {
	h := newHarness(t)
	pid := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompDeny)
	held, release := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread() // the tracer's thread; never unlocked
		held <- unix.PtraceSeize(pid)
		<-release
		unix.PtraceDetach(pid)
	}()
	if err := <-held; err != nil {
		t.Fatalf("seize: %v", err)
	}
	defer close(release)
	_, err := h.d.Launch(context.Background(), api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)},
		&api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "seccomp") {
		t.Errorf("a launch for a traced caller under a filter: %v, want a conflict naming its seccomp filters", err)
	}
}

// TestIntegrationLaunchCallersFilterKillsExec: a caller whose filter kills
// the process or traps at execve gets a conflict saying its workload did
// not run, and a claim released as never started, not a 201 for a
// workload that never ran (whose claim then said it was killed by SIGSYS).
// So does one whose filter refuses the exec, the write of why and the
// exit: the shim, left waiting, is killed.
func TestIntegrationLaunchCallersFilterKillsExec(t *testing.T) {
	h := newHarness(t)
	for _, mode := range []string{testenv.SeccompKillExec, testenv.SeccompTrapExec, testenv.SeccompMute} {
		// Where the graph cannot tell (the source lost events meanwhile,
		// or could not catch up, under other tests' storms) the launch
		// is taken to have run, by design: try again.
		for attempt := 1; ; attempt++ {
			pid := testenv.SeccompCaller(t, 65534, 65534, mode)
			before := h.d.losses()
			cl, err := h.d.Launch(context.Background(), api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)},
				&api.LaunchRequest{Argv: []string{"/bin/sleep", "600"}, Cwd: "/"})
			if err == nil {
				// A shim the launch took to have run is its claim's
				// root, left waiting (mute): never left behind.
				syscall.Kill(int(cl.Pid), syscall.SIGKILL)
				if attempt < 5 {
					t.Logf("%s: taken to have run (losses %d -> %d); again", mode, before.n, h.d.losses().n)
					continue
				}
			}
			if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "did not run") {
				t.Errorf("%s: a launch whose exec the caller's filter ends: %v, want a conflict saying it did not run", mode, err)
			}
			break
		}
	}
	uid := uint32(65534)
	claims, err := h.d.st.List(store.Filter{UID: &uid, State: store.Released})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range claims {
		if c.Pid == 0 && c.LastVerdict != nil && strings.Contains(c.LastVerdict.Reason, "did not run") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d claims released as never started, saying the workload did not run; want the three launches'", n)
	}
}

// TestIntegrationLaunchWorkloadTakesShimName: a workload that runs, takes
// the shim's name and ends at once is a launch that ran (201), as the
// graph's second exec of its root proves: the name alone, which any
// process may give itself, had its launch answered 409 and its claim
// released while it ran (a review's workload left children running
// unclaimed so).
func TestIntegrationLaunchWorkloadTakesShimName(t *testing.T) {
	h := newHarness(t)
	// The launch looks once the workload has ended under the name, as
	// it may under load.
	h.d.execEnded = func(pid int32) {
		testenv.Eventually(t, 10*time.Second, func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			return err != nil || bytes.Contains(b, []byte(") Z "))
		}, "the workload did not end")
	}
	for i := range 5 {
		cl, err := h.d.Launch(context.Background(), api.Peer{Pid: int32(os.Getpid())},
			&api.LaunchRequest{Argv: []string{"/bin/sh", "-c", "printf spawn/shim > /proc/self/comm; exit 3"}, Cwd: "/", Detach: true})
		if err != nil {
			t.Fatalf("launch %d of a workload that took the shim's name: %v", i, err)
		}
		if cl.Pid == 0 {
			t.Errorf("launch %d: no root pid on the claim of a workload that ran", i)
		}
	}
}

// TestNeverExecedNeedsNoLoss: the graph's proof that a launch process
// never exec'd its workload holds only while the source lost nothing
// since the spawn: an eBPF record dropped in a full ring is counted by
// the kernel before the source reports it, and the graph then showed the
// node watched without a gap, its workload's exec missing.
func TestNeverExecedNeedsNoLoss(t *testing.T) {
	h := newHarness(t)
	var pid int32
	var tok token.Token
	h.d.execEnded = func(p int32) {
		fd, err := unix.PidfdOpen(int(p), 0)
		if err != nil {
			t.Errorf("pidfd of the launch process: %v", err)
			return
		}
		defer unix.Close(fd)
		pid = p
		if tok, err = tokenFromPidfd(fd, p, h.d.boot); err != nil {
			t.Errorf("token of the launch process: %v", err)
		}
	}
	caller := testenv.SeccompCaller(t, 65534, 65534, testenv.SeccompKillExec)
	if _, err := h.d.Launch(context.Background(), api.Peer{UID: 65534, GID: 65534, Pid: int32(caller)},
		&api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("a launch killed at its exec: %v, want a conflict", err)
	}
	for attempt := 1; ; attempt++ {
		now := h.d.losses()
		if got := h.d.neverExeced(pid, tok, now); !got && attempt < 5 && h.d.losses() != now {
			continue // events lost meanwhile (other tests' storms): again
		} else if !got {
			t.Errorf("nothing lost: neverExeced = false, want true")
		}
		for _, tt := range []struct {
			name string
			mark lossMark
		}{
			{"one lost since the spawn", lossMark{n: now.n - 1, ok: true}},
			{"count unread", lossMark{}},
		} {
			if h.d.neverExeced(pid, tok, tt.mark) {
				t.Errorf("%s: neverExeced = true, want false", tt.name)
			}
		}
		return
	}
}
