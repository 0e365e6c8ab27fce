package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
	"golang.org/x/sys/unix"
)

// failingStore is a real store whose writes fail on demand.
// before, when set, runs ahead of every write.
type failingStore struct {
	*store.Store
	fail     atomic.Bool // Update fails
	failList atomic.Bool // List fails
	failAdd  atomic.Bool // AddMember fails
	before   func(id string)
	lists    atomic.Int32 // List calls
}

func (f *failingStore) List(flt store.Filter) ([]store.Claim, error) {
	f.lists.Add(1)
	if f.failList.Load() {
		return nil, errDiskFull
	}
	return f.Store.List(flt)
}

var errDiskFull = errors.New("disk full (injected)")

func (f *failingStore) AddMember(id string, ms ...store.Member) (int, error) {
	if f.failAdd.Load() {
		return 0, errDiskFull
	}
	return f.Store.AddMember(id, ms...)
}

func (f *failingStore) Update(id string, fn func(*store.Claim) error) error {
	if f.before != nil {
		f.before(id)
	}
	if f.fail.Load() {
		return errDiskFull
	}
	return f.Store.Update(id, fn)
}

// lockedBuf collects log lines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

type harness struct {
	d    *Daemon
	st   *failingStore
	lg   *logfeed.Logger
	out  *lockedBuf
	boot procfs.BootID
}

// newHarness wires a daemon to a real store, a real tracker and a log feed
// into a buffer, without its API server or main loop: the executor is
// driven directly.
func newHarness(t *testing.T) *harness { return newHarnessWith(t, store.Options{}) }

// newHarnessWith is newHarness with the store opened with opts.
func newHarnessWith(t *testing.T, opts store.Options) *harness {
	t.Helper()
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(filepath.Join(t.TempDir(), "claims.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	out := &lockedBuf{}
	lg, err := logfeed.New(logfeed.Config{Writer: out, Boot: boot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close(context.Background()) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr, err := tracker.Start(ctx, tracker.Options{Mechanism: "auto", Boot: boot})
	if err != nil {
		testenv.Skip(t, "no event mechanism: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	h := &harness{st: &failingStore{Store: s}, lg: lg, out: out, boot: boot}
	cfg := DefaultConfig()
	cfg.StateDir = t.TempDir() // a job's output goes under it
	cfg.Grace = api.Duration(200 * time.Millisecond)
	h.d = newDaemon(cfg, boot, h.st, &feed{Logger: lg}, time.Now)
	h.d.setTracker(tr)
	wctx, wcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.d.memberWriter(wctx) }()
	t.Cleanup(func() { wcancel(); <-done })
	return h
}

// tree starts sh with two children (a TERM-ignoring one) and returns it
// with the children's pids.
func tree(t *testing.T) (*exec.Cmd, []int32) {
	t.Helper()
	return testenv.Shell(t, `sleep 60 & echo $!; sh -c 'trap "" TERM; echo $$; while :; do sleep 1; done' & wait`, 2)
}

// claim stores a running grant for pid, held by holder when not nil.
func (h *harness) claim(t *testing.T, pid int, holder *store.Instance, wall time.Duration) store.Claim {
	t.Helper()
	ph, err := pidfd.Open(int32(pid), h.boot)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	c := store.Claim{Kind: store.Grant, UID: 0, Pid: int32(pid), Token: ph.Token(), Holder: holder, WallClock: wall}
	if err := h.st.Put(&c); err != nil {
		t.Fatal(err)
	}
	h.d.claims.set(&c)
	h.d.index(&c)
	h.d.admit(c.ID, c.Pid, ph.Token())
	return c
}

// grant stores a running grant of uid's for pid, without a holder.
func (h *harness) grant(t *testing.T, pid int, uid uint32) store.Claim {
	t.Helper()
	return h.running(t, store.Grant, pid, uid)
}

// running stores a running claim of kind, uid's, for pid (no holder, no
// cgroup).
func (h *harness) running(t *testing.T, kind store.Kind, pid int, uid uint32) store.Claim {
	t.Helper()
	ph, err := pidfd.Open(int32(pid), h.boot)
	if err != nil {
		t.Fatal(err)
	}
	c := store.Claim{Kind: kind, UID: uid, Pid: ph.Pid(), Token: ph.Token()}
	ph.Close()
	if err := h.st.Put(&c); err != nil {
		t.Fatal(err)
	}
	h.d.claims.set(&c)
	h.d.index(&c)
	h.d.admit(c.ID, c.Pid, c.Token)
	return c
}

// signalLines counts the signal_sent lines for the given pids.
func (h *harness) signalLines(t *testing.T, pids map[int32]bool) int {
	t.Helper()
	if err := h.lg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range h.lines(t) {
		ev, _ := l["event"].(map[string]any)
		proc, _ := l["process"].(map[string]any)
		if ev["action"] != logfeed.ActionSignalSent || proc == nil {
			continue
		}
		if pid, ok := proc["pid"].(float64); ok && pids[int32(pid)] {
			n++
			sv, _ := l["supervisor"].(map[string]any)
			claim, _ := sv["claim"].(map[string]any)
			if claim["id"] == nil || claim["id"] == "" {
				t.Errorf("signal line without supervisor.claim.id: %v", l)
			}
		}
	}
	return n
}

func (h *harness) recorded(id string, pid int32) bool {
	c, err := h.st.Get(id)
	return err == nil && slices.ContainsFunc(c.Members, func(m store.Member) bool { return m.Pid == pid })
}

func (h *harness) lines(t *testing.T) []map[string]any { return h.out.lines(t) }

// TestIntegrationEverySignalLogged tears a tree down through every path a
// daemon has and counts, for each, the signal_sent lines against the
// signals the outcome says were sent or refused: exactly one line each.
// Before one teardown constructor, a kill of a grant's member sent SIGSTOP,
// SIGTERM and SIGCONT with no line at all.
func TestIntegrationEverySignalLogged(t *testing.T) {
	h := newHarness(t)
	paths := []struct {
		name string
		run  func(c store.Claim, members []int32) (*actions.Outcome, error)
	}{
		{"release", func(c store.Claim, _ []int32) (*actions.Outcome, error) {
			res, err := h.d.Release(context.Background(), api.Peer{UID: 0, Pid: 1}, c.ID, &api.ReleaseRequest{})
			return res.Outcome, err
		}},
		{"kill of the root", func(c store.Claim, _ []int32) (*actions.Outcome, error) {
			out, err := h.d.Kill(context.Background(), api.Peer{UID: 0, Pid: 1}, &api.ClaimRequest{Pid: c.Pid, Token: c.Token})
			return &out, err
		}},
		{"kill of a member", func(c store.Claim, members []int32) (*actions.Outcome, error) {
			// The member writer records the tree's members as the
			// daemon admits its root.
			if !testenv.Poll(10*time.Second, func() bool { return h.recorded(c.ID, members[1]) }) {
				return nil, errors.New("member never recorded")
			}
			mh, err := pidfd.Open(members[1], h.boot)
			if err != nil {
				return nil, err
			}
			defer mh.Close()
			out, err := h.d.Kill(context.Background(), api.Peer{UID: 0, Pid: 1}, &api.ClaimRequest{Pid: members[1], Token: mh.Token()})
			return &out, err
		}},
		{"wall clock", func(c store.Claim, _ []int32) (*actions.Outcome, error) {
			_, out, err := h.d.settle(context.Background(), c.ID, request{trigger: WallClock})
			return out, err
		}},
		{"holder exit", func(c store.Claim, _ []int32) (*actions.Outcome, error) {
			_, out, err := h.d.settle(context.Background(), c.ID, request{trigger: HolderExit})
			return out, err
		}},
		{"reconcile of an orphan", func(c store.Claim, _ []int32) (*actions.Outcome, error) {
			// The holder recorded for this claim is gone.
			_, out, err := h.d.settle(context.Background(), c.ID, request{trigger: Startup})
			return out, err
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			cmd, members := tree(t)
			var holder *store.Instance
			if p.name == "reconcile of an orphan" || p.name == "holder exit" {
				pid, tok := h.goneInstance(t)
				holder = &store.Instance{Pid: pid, Token: tok}
			}
			// Admission records the members the graph holds: wait until
			// it has seen them born.
			testenv.Eventually(t, 10*time.Second, func() bool {
				for _, m := range members {
					if _, ok := h.d.tr.Load().Graph().Live(m); !ok {
						return false
					}
				}
				return true
			}, "the graph never saw the tree's members %v", members)
			c := h.claim(t, cmd.Process.Pid, holder, time.Second)
			out, err := p.run(c, members)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if out == nil || sent(out) == 0 || !out.Dead {
				t.Fatalf("%s: outcome %+v, want a teardown that sent signals and left nothing alive", p.name, out)
			}
			pids := map[int32]bool{}
			for _, m := range out.Targeted {
				pids[m.Pid] = true
			}
			if got := h.signalLines(t, pids); got != sent(out) {
				t.Errorf("%s: %d signal_sent lines, outcome counts %d signals (%v, %d refused)", p.name, got, sent(out), out.Signals, out.SignalsFailed)
			}
		})
	}
}

// sent counts the signals an outcome says were sent or refused.
func sent(o *actions.Outcome) int {
	n := o.SignalsFailed
	for _, v := range o.Signals {
		n += v
	}
	return n
}

// TestIntegrationStoreErrorNotDropped: a release whose store write fails
// returns the error (a 5xx, not a 4xx), counts and logs it, signals
// nothing, and leaves the in-memory index as the store has it: running and
// watched. Before, the write error was ignored and the claim dropped from
// the index while the store still said running.
func TestIntegrationStoreErrorNotDropped(t *testing.T) {
	h := newHarness(t)
	cmd, _ := tree(t)
	c := h.claim(t, cmd.Process.Pid, nil, 0)
	h.st.fail.Store(true)
	_, err := h.d.Release(context.Background(), api.Peer{UID: 0, Pid: 1}, c.ID, &api.ReleaseRequest{})
	h.st.fail.Store(false)
	if err == nil || !errors.Is(err, errDiskFull) {
		t.Fatalf("Release with a failing store = %v, want the store's error", err)
	}
	for _, sentinel := range []error{api.ErrBadRequest, api.ErrForbidden, api.ErrNotFound, api.ErrConflict} {
		if errors.Is(err, sentinel) {
			t.Errorf("Release error %v is a client error (%v), want a server error", err, sentinel)
		}
	}
	if n := h.d.storeErrors.Load(); n != 1 {
		t.Errorf("store errors counted = %d, want 1", n)
	}
	st, err := h.d.Status(context.Background(), api.Peer{UID: 0})
	if err != nil || st.StoreErrors != 1 || !strings.Contains(st.LastStoreError, "disk full") {
		t.Errorf("Status = %d %q, %v; want 1 store error and its reason", st.StoreErrors, st.LastStoreError, err)
	}
	got, err := h.st.Get(c.ID)
	if err != nil || got.State != store.Running {
		t.Fatalf("stored state = %s, %v; want running", got.State, err)
	}
	h.d.mu.RLock()
	indexed := h.d.roots[c.Pid] == c.ID
	h.d.mu.RUnlock()
	if !indexed {
		t.Error("the claim left the in-memory index though the store still has it running")
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the root was signalled though the release never started: %v", err)
	}
	h.lg.Flush(context.Background())
	found := false
	for _, l := range h.lines(t) {
		if ev, _ := l["event"].(map[string]any); ev["action"] == logfeed.ActionInternalError {
			found = true
		}
	}
	if !found {
		t.Error("no internal_error line for the failed store write")
	}
	// With the store back, the same release goes through.
	if res, err := h.d.Release(context.Background(), api.Peer{UID: 0, Pid: 1}, c.ID, &api.ReleaseRequest{}); err != nil || res.Claim.State != store.Released {
		t.Errorf("Release after the store recovered = %+v, %v; want released", res.Claim.State, err)
	}
}

// TestIntegrationReleaseAndReconcileAgree: the cases where release and
// the reconcile once decided differently now go through the one table.
// A grant that never recorded its start (the daemon stopped during the
// launch) but whose cgroup holds a process has that process torn down, by
// a release as by a reconcile; a job found gone says its exit code is
// unknown, whichever asked.
func TestIntegrationReleaseAndReconcileAgree(t *testing.T) {
	h := newHarness(t)
	base := findCgroupBase("auto")
	if base.dir == "" {
		testenv.Skip(t, "no writable cgroup v2: %s", base.reason)
	}
	for _, trig := range []Trigger{ReleaseAsked, Startup} {
		t.Run(trig.String(), func(t *testing.T) {
			c := store.Claim{Kind: store.Grant}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			escaped := h.cgroupMember(t, base, c.ID)
			it, out, err := h.d.settle(context.Background(), c.ID, request{trigger: trig})
			if err != nil || it.Action != TearDown.String() || out == nil || !out.Dead {
				t.Fatalf("settle(%s) of an unstarted grant whose cgroup holds %d = %+v, %+v, %v; want it torn down", trig, escaped.Process.Pid, it, out, err)
			}
			got, _ := h.st.Get(c.ID)
			if got.State != store.Released {
				t.Errorf("state = %s, want released", got.State)
			}
			testenv.Eventually(t, 5*time.Second, func() bool {
				return escaped.ProcessState != nil || escaped.Process.Signal(syscall.Signal(0)) != nil || zombie(escaped.Process.Pid)
			}, "the process in the grant's cgroup survived")
		})
	}
	for _, trig := range []Trigger{ReleaseAsked, Pass} {
		t.Run("gone job, "+trig.String(), func(t *testing.T) {
			pid, tok := h.goneInstance(t)
			c := store.Claim{Kind: store.Job, Pid: pid, Token: tok}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.d.settle(context.Background(), c.ID, request{trigger: trig}); err != nil {
				t.Fatal(err)
			}
			got, _ := h.st.Get(c.ID)
			if got.State != store.Exited || !strings.Contains(got.RetiredReason, "exit code unknown") {
				t.Errorf("gone job after %s = %s %q, want exited with the exit code unknown", trig, got.State, got.RetiredReason)
			}
		})
	}
}

// reissued returns a gone instance (goneInstance) whose pid spawn gave to
// a new process, trying another when a pid was taken before spawn could
// have it (ErrPidTaken); the test fails after 20 such pids.
func (h *harness) reissued(t *testing.T, spawn func(pid int32) (*testenv.Spawned, error)) (int32, token.Token, *testenv.Spawned) {
	t.Helper()
	for range 20 {
		pid, tok := h.goneInstance(t)
		s, err := spawn(pid)
		if errors.Is(err, testenv.ErrPidTaken) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return pid, tok, s
	}
	t.Fatal("20 pids were taken before they could be reissued")
	return 0, token.Token{}, nil
}

// goneInstance runs a process to its end and returns its pid and token:
// an instance a claim can name that is GONE.
func (h *harness) goneInstance(t *testing.T) (int32, token.Token) {
	t.Helper()
	gone := exec.Command("true")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	gh, err := pidfd.Open(int32(gone.Process.Pid), h.boot)
	if err != nil {
		t.Fatal(err)
	}
	tok := gh.Token()
	gh.Close()
	gone.Wait()
	return int32(gone.Process.Pid), tok
}

// cgroupMember gives stored claim id a cgroup of its own under base and
// starts a sleep in it, and returns the sleep.
func (h *harness) cgroupMember(t *testing.T, base cgroupBase, id string) *exec.Cmd {
	t.Helper()
	dir, fd, err := base.create(id)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	t.Cleanup(func() { removeCgroup(dir) })
	if err := h.st.Update(id, func(x *store.Claim) error { x.Cgroup = dir; return nil }); err != nil {
		t.Fatal(err)
	}
	member := exec.Command("sleep", "60")
	if err := member.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { member.Process.Kill(); member.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(member.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return member
}

func zombie(pid int) bool {
	var st procfs.Stat
	return procfs.NewReader("/proc").ReadStat(int32(pid), &st) == nil && st.Zombie()
}

// TestIntegrationSurvivorsKeepClaimOpen: a teardown whose member survives
// SIGKILL (frozen) has failed: the claim stays open in state survivors,
// listing the survivor by (pid, token), and a later pass, once the member
// is thawed, tears it down and closes the claim. Before, such a claim was
// counted torn down, closed as released, and never looked at again.
func TestIntegrationSurvivorsKeepClaimOpen(t *testing.T) {
	h := newHarness(t)
	cmd, members := tree(t)
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, ok := h.d.tr.Load().Graph().Live(members[0])
		return ok
	}, "the graph never saw the tree")
	c := h.claim(t, cmd.Process.Pid, nil, 0)
	frozen := members[0]
	thaw := testenv.Freeze(t, frozen)

	rep := h.d.reconcileAll(context.Background(), request{trigger: ReleaseAsked})
	if rep.Failed != 1 || rep.TornDown != 0 {
		t.Errorf("report %+v: want the teardown counted failed", rep)
	}
	got, err := h.st.Get(c.ID)
	if err != nil || got.State != store.Survivors || got.Release == nil ||
		!slices.ContainsFunc(got.Release.Survivors, func(s store.Instance) bool { return s.Pid == frozen && !s.Token.IsZero() }) {
		t.Fatalf("claim after a teardown with a frozen survivor = %s %+v, %v; want state survivors listing %d", got.State, got.Release, err, frozen)
	}
	// A pass while it is still frozen keeps the claim open.
	if it, _, err := h.d.settle(context.Background(), c.ID, request{trigger: Pass}); err != nil || it.Action != TearDown.String() {
		t.Errorf("pass while the survivor is frozen = %+v, %v; want another teardown", it, err)
	}
	if got, _ := h.st.Get(c.ID); got.State != store.Survivors {
		t.Errorf("state while the survivor is frozen = %s, want survivors", got.State)
	}
	// Thawed, it dies of the SIGKILL it has pending, or of the next
	// teardown: either way the next pass closes the claim.
	thaw()
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, _, err := h.d.settle(context.Background(), c.ID, request{trigger: Pass})
		got, _ := h.st.Get(c.ID)
		return err == nil && got.State == store.Released && zombieOrGone(frozen)
	}, "the claim did not close once its survivor was thawed")
}

// TestIntegrationHiddenRootUnverifiable: the daemon's view of /proc lacks
// the entry of a live root (a bind mount over it, in the mount namespace
// the judging thread sees). The pidfd says the process lives, so it is
// UNVERIFIABLE: kept, reported, never signalled. Before, it was GONE and
// the grant released while its process ran on.
func TestIntegrationHiddenRootUnverifiable(t *testing.T) {
	h := newHarness(t)
	cmd, _ := tree(t)
	c := h.claim(t, cmd.Process.Pid, nil, 0)
	var it api.ReportItem
	var err error
	hidingProc(t, cmd.Process.Pid, func() { it, _, err = h.d.settle(context.Background(), c.ID, request{trigger: ReleaseAsked}) })
	if !errors.Is(err, api.ErrConflict) || it.Verdict != verdict.Unverifiable || !strings.Contains(it.Reason, "cannot be read") {
		t.Errorf("release of a root whose /proc entry is hidden = %+v, %v; want UNVERIFIABLE and refused", it, err)
	}
	if got, _ := h.st.Get(c.ID); got.State != store.Unverifiable {
		t.Errorf("state = %s, want unverifiable (kept)", got.State)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil || zombie(cmd.Process.Pid) {
		t.Error("the hidden root was signalled")
	}

	// A job whose root cannot be judged at a pass is retired, unsignalled:
	// the daemon stops answering for what it cannot see.
	job, _ := tree(t)
	jc := h.running(t, store.Job, job.Process.Pid, 0)
	hidingProc(t, job.Process.Pid, func() { it, _, err = h.d.settle(context.Background(), jc.ID, request{trigger: Pass}) })
	if got, _ := h.st.Get(jc.ID); err != nil || it.Verdict != verdict.Unverifiable || got.State != store.Retired {
		t.Errorf("pass over a job whose root is hidden = %+v, %v, state %s; want UNVERIFIABLE, retired", it, err, got.State)
	}
	if err := job.Process.Signal(syscall.Signal(0)); err != nil || zombie(job.Process.Pid) {
		t.Error("the hidden job's root was signalled")
	}
}

// hidingProc runs fn in a thread of its own whose mount namespace has an
// empty directory over /proc/PID: to the daemon's code in fn, the process
// is alive and unreadable. The thread is never given back to the runtime,
// so the namespace dies with it.
func hidingProc(t *testing.T, pid int, fn func()) {
	t.Helper()
	empty := t.TempDir()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- err
			return
		}
		if err := unix.Mount(empty, "/proc/"+strconv.Itoa(pid), "", unix.MS_BIND, ""); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("hiding /proc/%d: %v", pid, err)
	}
}

// TestIntegrationHiddenHolderKeepsGrant: a grant whose holder cannot be
// judged (its /proc entry hidden: UNVERIFIABLE) is not an orphan: a pass
// keeps it and signals nothing. Only a holder GONE or FOREIGN lets the
// grant go; a failed look is no exit.
func TestIntegrationHiddenHolderKeepsGrant(t *testing.T) {
	h := newHarness(t)
	cmd, _ := tree(t)
	holder := exec.Command("sleep", "100")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	hh, err := pidfd.Open(int32(holder.Process.Pid), h.boot)
	if err != nil {
		t.Fatal(err)
	}
	htok := hh.Token()
	hh.Close()
	c := h.claim(t, cmd.Process.Pid, &store.Instance{Pid: int32(holder.Process.Pid), Token: htok}, 0)
	var it api.ReportItem
	var v verdict.Verdict
	hidingProc(t, holder.Process.Pid, func() {
		v = h.d.judge.Judge(int32(holder.Process.Pid), htok)
		it, _, err = h.d.settle(context.Background(), c.ID, request{trigger: Pass})
	})
	if v.Result != verdict.Unverifiable {
		t.Fatalf("the hidden holder judged %s (%s), want UNVERIFIABLE", v.Result, v.Reason)
	}
	if err != nil || it.Orphan || it.Action == TearDown.String() {
		t.Errorf("pass over a grant whose holder cannot be judged = %+v, %v; want it kept, no orphan", it, err)
	}
	if got, _ := h.st.Get(c.ID); got.State != store.Running {
		t.Errorf("state = %s, want running (kept)", got.State)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil || zombie(cmd.Process.Pid) {
		t.Error("the root of a grant whose holder cannot be judged was signalled")
	}
}

func zombieOrGone(pid int32) bool {
	var st procfs.Stat
	return procfs.NewReader("/proc").ReadStat(pid, &st) != nil || st.Zombie()
}

// TestIntegrationQuietPasses: a periodic pass over a running claim whose
// verdict has not changed logs nothing; a release logs its verdict.
// Before, every running claim's verdict was logged every 30 s.
func TestIntegrationQuietPasses(t *testing.T) {
	h := newHarness(t)
	cmd, _ := tree(t)
	c := h.claim(t, cmd.Process.Pid, nil, 0)
	if err := h.st.Update(c.ID, func(x *store.Claim) error {
		x.LastVerdict = &store.Verdict{Result: verdict.Owned, Reason: "launched"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	verdicts := func() int {
		h.lg.Flush(context.Background())
		n := 0
		for _, l := range h.lines(t) {
			if ev, _ := l["event"].(map[string]any); ev["action"] == logfeed.ActionVerdict {
				n++
			}
		}
		return n
	}
	for range 3 {
		if _, _, err := h.d.settle(context.Background(), c.ID, request{trigger: Pass}); err != nil {
			t.Fatal(err)
		}
	}
	if n := verdicts(); n != 0 {
		t.Errorf("3 passes over an unchanged OWNED claim logged %d verdicts, want 0", n)
	}
	if _, _, err := h.d.settle(context.Background(), c.ID, request{trigger: ReleaseAsked}); err != nil {
		t.Fatal(err)
	}
	if n := verdicts(); n != 1 {
		t.Errorf("a release logged %d verdicts, want 1", n)
	}
}

// TestIntegrationKeptGoneRootSaysGone: a grant whose root is gone but whose
// cgroup still holds a member is kept (release, the wall clock or its
// holder's exit tears the member down), and its stored verdict says GONE:
// list and show said OWNED, the verdict of its launch, because a kept
// claim was written only when its state changed, and the startup summary
// counted it readopted.
func TestIntegrationKeptGoneRootSaysGone(t *testing.T) {
	h := newHarness(t)
	base := findCgroupBase("auto")
	if base.dir == "" {
		testenv.Skip(t, "no writable cgroup v2: %s", base.reason)
	}
	for _, trig := range []Trigger{Pass, Startup} {
		t.Run(trig.String(), func(t *testing.T) {
			pid, tok := h.goneInstance(t)
			c := store.Claim{Kind: store.Grant, State: store.Running, Pid: pid, Token: tok,
				LastVerdict: &store.Verdict{Result: verdict.Owned, Reason: "launched"}}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			h.cgroupMember(t, base, c.ID)
			it, _, err := h.d.settle(context.Background(), c.ID, request{trigger: trig})
			if err != nil || it.Action != Keep.String() {
				t.Fatalf("settle(%s) of a grant with a gone root and a member in its cgroup = %+v, %v; want it kept", trig, it, err)
			}
			got, _ := h.st.Get(c.ID)
			if got.State != store.Running || got.LastVerdict == nil || got.LastVerdict.Result != verdict.Gone {
				t.Errorf("stored after %s: state %s, verdict %+v; want running, GONE", trig, got.State, got.LastVerdict)
			}
			var rep api.Report
			count(&rep, it, nil, trig)
			if rep.Readopted != 0 || (trig == Startup && rep.AlreadyGone != 1) {
				t.Errorf("counted after %s: %+v; want the gone root counted gone, not readopted", trig, rep)
			}
		})
	}
}

// TestIntegrationForeignRootCgroupTornDown: a claim whose root's pid was
// reissued to a stranger (FOREIGN) while its cgroup holds a process has
// that process torn down by a release, and the stranger is not
// signalled. Before, the table decided the teardown but the executor
// refused a rootless one on anything but GONE: the claim was closed and
// the process ran on, unmanaged; a user reissuing its root's pid escaped
// a wall clock that way.
func TestIntegrationForeignRootCgroupTornDown(t *testing.T) {
	h := newHarness(t)
	base := findCgroupBase("auto")
	if base.dir == "" {
		testenv.Skip(t, "no writable cgroup v2: %s", base.reason)
	}
	for _, kind := range []store.Kind{store.Grant, store.Job} {
		t.Run(string(kind), func(t *testing.T) {
			pid, tok, stranger := h.reissued(t, func(pid int32) (*testenv.Spawned, error) { return testenv.Reissue(t, pid) })
			c := store.Claim{Kind: kind, Pid: pid, Token: tok}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			escaped := h.cgroupMember(t, base, c.ID)
			it, out, err := h.d.settle(context.Background(), c.ID, request{trigger: ReleaseAsked})
			if err != nil || it.Action != TearDown.String() || out == nil || !out.Acted || !out.Dead {
				t.Fatalf("release of a %s whose root's pid %d is a stranger's and whose cgroup holds %d = %+v, %+v, %v; want the cgroup torn down",
					kind, pid, escaped.Process.Pid, it, out, err)
			}
			testenv.Eventually(t, 5*time.Second, func() bool {
				return escaped.Process.Signal(syscall.Signal(0)) != nil || zombie(escaped.Process.Pid)
			}, "the process in the %s's cgroup survived", kind)
			if err := syscall.Kill(int(stranger.Pid), 0); err != nil || zombie(int(stranger.Pid)) {
				t.Errorf("the stranger at the root's pid %d was signalled: %v", stranger.Pid, err)
			}
		})
	}
}
