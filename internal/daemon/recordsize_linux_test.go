package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func repeatArgv(s string, n, each int) []string {
	argv := []string{"/bin/true"}
	for range n {
		argv = append(argv, strings.Repeat(s, each))
	}
	return argv
}

// TestRoomForValidArgv: what the API accepts in plain text (32 KiB of
// argv in 1,024 arguments, an owner of 256 bytes) leaves room for every
// later write; the audit's 32,000 '<' too, now that they take a byte each.
func TestRoomForValidArgv(t *testing.T) {
	cgroup := "/sys/fs/cgroup/system.slice/procsupervisor.service/supervisor/j-aaaaaaaaaaaa"
	for _, argv := range [][]string{
		repeatArgv("x", 1023, 32), // 1024 entries, 32 KiB in all
		repeatArgv("<", 8, 4000),
		repeatArgv("&", 8, 4000),
	} {
		c := store.Claim{ID: store.NewID(store.Job), Kind: store.Job, Argv: argv, Owner: strings.Repeat("o", api.MaxOwner), Cwd: "/home/someone/src",
			Holder: &store.Instance{Pid: math.MaxInt32, Token: token.Token{Start: math.MaxUint64, Prec: token.Ticks}},
			Limits: []store.Limit{{Name: "RLIMIT_NOFILE", Soft: math.MaxUint64, Hard: math.MaxUint64}}}
		if err := roomFor(&c, cgroup, "/var/lib/procsupervisor/jobs/"+c.ID+".out"); err != nil {
			t.Errorf("roomFor(argv of %d x %q) = %v, want room", len(argv), argv[1][:1], err)
		}
	}
	empty := largest(store.Claim{Kind: store.Job}, cgroup, "/var/lib/procsupervisor/jobs/j-aaaaaaaaaaaa.out")
	n, _ := store.RecordSize(&empty)
	t.Logf("room kept for later writes: %d bytes of %d", n, maxRecord)
}

// TestRoomForRefusesCleanly: an argv that would not leave the room is a
// 400 naming the limit, without the store's path.
func TestRoomForRefusesCleanly(t *testing.T) {
	c := store.Claim{ID: store.NewID(store.Grant), Kind: store.Grant, Argv: repeatArgv("\x01", 8, 4000)}
	err := roomFor(&c, "", "")
	if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("roomFor(32000 control characters) = %v, want a bad request naming the limit", err)
	}
}

// TestRoomLeftIsEnough: a claim with the most argv roomFor lets through
// takes, in a real store, every write the daemon makes of it later at its
// widest: before, a launch stored near the limit had its exit, its
// release and its failure refused, and stayed running for good.
func TestRoomLeftIsEnough(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cgroup := "/sys/fs/cgroup/supervisor/"
	// n control characters (6 bytes each as JSON), 4000 an argument.
	mk := func(n int) store.Claim {
		c := store.Claim{ID: store.NewID(store.Job), Kind: store.Job, Argv: []string{"/bin/sleep", "1"}}
		for ; n > 0; n -= 4000 {
			c.Argv = append(c.Argv, strings.Repeat("\x01", min(n, 4000)))
		}
		return c
	}
	// The largest argv roomFor takes.
	lo, hi := 0, 32<<10
	for lo < hi {
		mid := (lo + hi + 1) / 2
		c := mk(mid)
		if roomFor(&c, cgroup+c.ID, "/state/jobs/"+c.ID+".out") == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	c := mk(lo)
	if err := st.Put(&c); err != nil {
		t.Fatalf("Put of the largest claim roomFor takes (%d control characters) = %v", lo, err)
	}
	n, _ := store.RecordSize(&c)
	t.Logf("most control characters roomFor takes: %d (a record of %d bytes)", lo, n)
	at := time.Now()
	tok := token.Token{Start: math.MaxUint64, Ino: math.MaxUint64, Prec: token.Ticks}
	for i := range tok.Boot {
		tok.Boot[i] = 0xee
	}
	var ms, short []actions.Member
	for i := range 3000 {
		ms = append(ms, actions.Member{Pid: math.MaxInt32 - int32(i), Token: tok, Reason: strings.Repeat("r", 600)})
		short = append(short, actions.Member{Pid: math.MaxInt32 - int32(i), Token: tok, Reason: strings.Repeat("r", i%40)})
	}
	long := verdict.Verdict{Result: verdict.Unverifiable, Reason: strings.Repeat("v", 5000), Mechanism: "netlink"}
	writes := map[string]func(x *store.Claim){
		"start": func(x *store.Claim) {
			x.Pid, x.Token, x.Pgid, x.Cgroup, x.OutputPath = math.MaxInt32, tok, math.MaxInt32, cgroup+x.ID, "/state/jobs/"+x.ID+".out"
			x.Deadline = at
			x.LastVerdict = &store.Verdict{Result: verdict.Owned, Reason: api.Trunc(strings.Repeat("\x01", 3000), launchReason), Mechanism: "pidfd", At: at}
		},
		"failed": func(x *store.Claim) {
			x.State = store.Released
			x.Release = &store.Release{Dead: true, At: at}
			x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: api.Trunc(launchFailed+strings.Repeat("\x1f", 3000), launchReason), At: at}
		},
		"releasing": func(x *store.Claim) {
			x.State, x.GraceUntil, x.Grace = store.Releasing, at, time.Hour
			x.LastVerdict = storeVerdict(long, at)
		},
		"teardown retired": func(x *store.Claim) {
			rel := &store.Release{Dead: false, Escalated: true, Ownership: verdict.Unverifiable, At: at, Cause: Cause(ReleaseAsked, true, verdict.Foreign)}
			rel.Survivors, rel.SurvivorsTotal = instances(ms)
			rel.Unproven, rel.UnprovenTotal = instances(short)
			x.Release, x.State = rel, store.Retired
			x.LastVerdict = storeVerdict(long, at)
			x.RetiredReason = api.Trunc("not signalled: "+strings.Repeat("e", 5000), laterReason)
		},
		"exit": func(x *store.Claim) {
			code := 255
			x.ExitCode, x.ExitSignal, x.EndedAt, x.State = &code, 9, at, store.Exited
			x.RetiredReason = api.Trunc(strings.Repeat("e", 5000), laterReason)
		},
		"followed up": func(x *store.Claim) { x.FollowedUp = true },
	}
	// In the order they come, each on top of the others.
	for _, name := range []string{"start", "releasing", "teardown retired", "exit", "followed up", "failed"} {
		if err := st.Update(c.ID, func(x *store.Claim) error { writes[name](x); return nil }); err != nil {
			t.Errorf("write %q of a claim roomFor took = %v", name, err)
		}
	}
}

// TestIntegrationArgvPastTheStore: the audit's launches. Plain and '<'
// argv of the API's 32 KiB are stored; one that would not leave the store
// room is a 400 without the store's path, counted as no store fault and
// leaving no claim behind.
func TestIntegrationArgvPastTheStore(t *testing.T) {
	h := newHarness(t)
	p := api.Peer{Pid: int32(os.Getpid())}
	cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: repeatArgv("<", 8, 4000)})
	if err != nil {
		t.Fatalf("Launch(/bin/true and 32000 '<') = %v, want it started", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		h.d.reconcileAll(context.Background(), request{trigger: Pass})
		c, err := h.st.Get(cl.ID)
		return err == nil && !Open(c.State)
	}, "the grant of /bin/true was not closed")

	before, _ := h.st.List(store.Filter{})
	_, err = h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: repeatArgv("\x01", 8, 4000), Detach: true})
	if !errors.Is(err, api.ErrBadRequest) {
		t.Fatalf("Launch(32000 control characters) = %v, want a bad request", err)
	}
	if strings.Contains(err.Error(), "claims.db") || !strings.Contains(err.Error(), "65536") {
		t.Errorf("Launch error %q names the store's file, or not the limit", err)
	}
	if n := h.d.storeErrors.Load(); n != 0 {
		t.Errorf("store errors = %d, want none: the caller's argv is no store fault", n)
	}
	after, _ := h.st.List(store.Filter{})
	if len(after) != len(before) {
		t.Errorf("claims %d after the refused launch, %d before", len(after), len(before))
	}
	h.lg.Flush(context.Background())
	for _, l := range h.lines(t) {
		if ev, _ := l["event"].(map[string]any); ev["action"] == logfeed.ActionInternalError {
			t.Errorf("internal_error line for a caller's argv: %v", l)
		}
	}
}

// TestIntegrationFailedLaunchNeverLeftRunning: a launch whose failure the
// store will not record deletes its claim; it stayed running with pid 0,
// for good.
func TestIntegrationFailedLaunchNeverLeftRunning(t *testing.T) {
	h := newHarness(t)
	h.st.fail.Store(true)
	_, err := h.d.Launch(context.Background(), api.Peer{Pid: int32(os.Getpid())}, &api.LaunchRequest{Argv: []string{"/nonexistent/program"}, Detach: true})
	h.st.fail.Store(false)
	if err == nil {
		t.Fatal("launch with every update failing succeeded")
	}
	cs, err := h.st.List(store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Errorf("claim %s left %s with pid %d by a launch that failed", c.ID, c.State, c.Pid)
	}
	if ents, _ := os.ReadDir(filepath.Join(h.d.cfg.StateDir, "jobs")); len(ents) > 0 {
		t.Errorf("job output %s left by a launch whose claim is gone", ents[0].Name())
	}
}

// TestIntegrationAdmitLongCmdline: a process whose command line is 16 KiB
// of control characters (96 KiB encoded) is admitted, its argv label cut
// to what leaves the store room; its admit failed as a store fault.
func TestIntegrationAdmitLongCmdline(t *testing.T) {
	h := newHarness(t)
	arg := strings.Repeat("\x01", 4000)
	cmd := testenv.Start(t, "/bin/sh", "-c", "sleep 600; :", arg, arg, arg, arg)
	pid := int32(cmd.Process.Pid)
	// Admitted before its exec has set up its arguments, it would have
	// none (or the test binary's).
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && strings.HasPrefix(string(b), "/bin/sh\x00-c\x00sleep 600; :\x00")
	}, "%d never exec'd sh", pid)
	cl, _ := h.admit(t, pid)
	c, err := h.st.Get(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Argv) < 3 || len(c.Argv) >= 7 || c.Argv[0] != "/bin/sh" {
		t.Errorf("admitted argv has %d entries (%.20q...), want the first ones of 7", len(c.Argv), c.Argv)
	}
	if err := roomFor(&c, "", ""); err != nil {
		t.Errorf("admitted claim leaves no room: %v", err)
	}
	if n := h.d.storeErrors.Load(); n != 0 {
		t.Errorf("store errors = %d, want none", n)
	}
}
