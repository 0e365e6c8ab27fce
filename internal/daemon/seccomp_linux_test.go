package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
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
	launchSleeper(t, h, p, "/bin/sh", "-c", "mkdir "+made+" 2> "+said+"; exec /bin/sleep 600")
	if _, err := os.Stat(made); err == nil {
		t.Errorf("the job made %s, which its caller's seccomp filter refuses", made)
	}
	if b, _ := os.ReadFile(said); !strings.Contains(string(b), "not supported") {
		t.Errorf("the job's mkdir said %q, want the caller's filter's EOPNOTSUPP", b)
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
