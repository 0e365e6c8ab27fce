package actions

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func newTeardown(t *testing.T, grace time.Duration) (*Teardown, *verdict.Judge) {
	t.Helper()
	j, err := verdict.New()
	if err != nil {
		t.Fatal(err)
	}
	return New(j, &ProcFinder{Boot: j.Boot}, Options{Grace: grace, KillWait: 2 * time.Second}), j
}

func claimOf(t *testing.T, j *verdict.Judge, pid int32) token.Token {
	t.Helper()
	h, err := pidfd.Open(pid, j.Boot)
	if err != nil {
		t.Fatalf("pidfd.Open(%d) = %v", pid, err)
	}
	defer h.Close()
	return h.Token()
}

// alive reports whether the instance claim still runs at pid.
func alive(j *verdict.Judge, pid int32, claim token.Token) bool {
	return j.Judge(pid, claim).Result == verdict.Owned
}

func waitGone(t *testing.T, j *verdict.Judge, pid int32, claim token.Token) {
	t.Helper()
	if !testenv.Poll(5*time.Second, func() bool { return !alive(j, pid, claim) }) {
		t.Errorf("pid %d still alive", pid)
	}
}

func targeted(out Outcome, pid int32) bool {
	return slices.ContainsFunc(out.Targeted, func(m Member) bool { return m.Pid == pid })
}

func TestIntegrationStoppedTreeIsTerminated(t *testing.T) {
	td, j := newTeardown(t, 3*time.Second)
	cmd, pids := testenv.Shell(t, `sleep 60 & echo $!; sleep 60 & echo $!; wait`, 2)
	root := int32(cmd.Process.Pid)
	claims := map[int32]token.Token{root: claimOf(t, j, root)}
	for _, p := range pids {
		claims[p] = claimOf(t, j, p)
	}
	// Park the whole tree: a stopped process queues SIGTERM forever unless
	// it is continued.
	for p := range claims {
		syscall.Kill(int(p), syscall.SIGSTOP)
	}
	out := td.Run(context.Background(), root, claims[root])
	if !out.Acted || !out.Dead || out.Verdict.Result != verdict.Owned {
		t.Fatalf("Run = %+v, want acted, dead, OWNED", out)
	}
	for p, c := range claims {
		if !targeted(out, p) {
			t.Errorf("pid %d not targeted: %+v", p, out.Targeted)
		}
		waitGone(t, j, p, c)
	}
	if out.Escalated {
		t.Errorf("escalated, but SIGTERM after SIGCONT should have been enough")
	}
	if out.Signals["SIGCONT"]+out.Signals["SIGCONT (group)"] == 0 || out.Signals["SIGTERM"]+out.Signals["SIGTERM (group)"] == 0 {
		t.Errorf("signals = %v, want SIGTERM and SIGCONT", out.Signals)
	}
}

func TestIntegrationTermIgnoredIsEscalated(t *testing.T) {
	td, j := newTeardown(t, 200*time.Millisecond)
	cmd, pids := testenv.Shell(t, `trap "" TERM; sleep 60 & echo $!; wait`, 1)
	root := int32(cmd.Process.Pid)
	claim := claimOf(t, j, root)
	child := claimOf(t, j, pids[0])
	out := td.Run(context.Background(), root, claim)
	if !out.Dead || !out.Escalated || out.Signals["SIGKILL"]+out.Signals["SIGKILL (group)"] == 0 {
		t.Fatalf("Run = %+v, want dead after SIGKILL", out)
	}
	waitGone(t, j, pids[0], child)
}

func TestIntegrationSetsidGrandchildIsFound(t *testing.T) {
	td, j := newTeardown(t, 2*time.Second)
	// root -> child (setsid, own session and group) -> grandchild
	cmd, pids := testenv.Shell(t, `setsid sh -c 'echo $$; sleep 60 & echo $!; wait' & wait`, 2)
	root := int32(cmd.Process.Pid)
	gclaim := claimOf(t, j, pids[1])
	out := td.Run(context.Background(), root, claimOf(t, j, root))
	if !out.Dead {
		t.Fatalf("Run = %+v, want dead", out)
	}
	for _, p := range pids {
		if !targeted(out, p) {
			t.Errorf("setsid'd descendant %d not targeted: %+v", p, out.Targeted)
		}
	}
	waitGone(t, j, pids[1], gclaim)
}

func TestIntegrationForeignIsNeverSignalled(t *testing.T) {
	testenv.RequireRoot(t)
	td, j := newTeardown(t, time.Second)
	for attempt := 0; attempt < 20; attempt++ {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := int32(cmd.Process.Pid)
		claim := claimOf(t, j, pid)
		cmd.Process.Kill()
		cmd.Wait()
		stranger, err := testenv.Reissue(t, pid)
		if err != nil {
			continue
		}
		sclaim := claimOf(t, j, pid)
		out := td.Run(context.Background(), pid, claim)
		if out.Acted || out.Verdict.Result != verdict.Foreign || len(out.Signals) != 0 || len(out.Survivors) != 0 {
			t.Fatalf("Run(reissued pid) = %+v, want FOREIGN, nothing signalled, no survivors named", out)
		}
		if !alive(j, pid, sclaim) {
			t.Fatal("the stranger at the reissued pid did not survive")
		}
		stranger.Stop()
		return
	}
	t.Fatal("could not reissue a pid")
}

// TestIntegrationReissueAfterVerdict proves the bound handle: the pid is
// reissued after the OWNED verdict and before the first signal, and the
// stranger who got it receives nothing.
func TestIntegrationReissueAfterVerdict(t *testing.T) {
	testenv.RequireRoot(t)
	td, j := newTeardown(t, time.Second)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := int32(cmd.Process.Pid)
	claim := claimOf(t, j, pid)
	var stranger *testenv.Spawned
	var sclaim token.Token
	td.afterBind = func() {
		cmd.Process.Kill()
		cmd.Wait()
		s, err := testenv.Reissue(t, pid)
		if err != nil {
			t.Fatalf("Reissue(%d) = %v", pid, err)
		}
		stranger, sclaim = s, claimOf(t, j, pid)
	}
	out := td.Run(context.Background(), pid, claim)
	if out.Verdict.Result != verdict.Owned {
		t.Fatalf("verdict = %v, want OWNED before the reissue", out.Verdict)
	}
	if len(out.Signals) != 0 {
		t.Errorf("signals = %v, want none delivered (the bound instance was gone)", out.Signals)
	}
	if !out.Dead {
		t.Errorf("Run = %+v, want dead (the claimed instance is gone)", out)
	}
	if !alive(j, pid, sclaim) {
		t.Fatal("the stranger who took the pid after the verdict was hit")
	}
	stranger.Stop()
}

func TestIntegrationGoneLeaderLiveGroupIsReported(t *testing.T) {
	td, j := newTeardown(t, time.Second)
	cmd, pids := testenv.Shell(t, `sleep 60 & echo $!`, 1)
	leader := int32(cmd.Process.Pid)
	claim := claimOf(t, j, leader)
	child := claimOf(t, j, pids[0])
	cmd.Wait() // the leader exits and is reaped; its group lives on
	out := td.Run(context.Background(), leader, claim)
	if out.Acted || out.Dead || out.Verdict.Result != verdict.Gone {
		t.Fatalf("Run = %+v, want GONE, not acted, not dead", out)
	}
	if !slices.ContainsFunc(out.Unproven, func(m Member) bool { return m.Pid == pids[0] }) {
		t.Errorf("unproven = %+v, want the orphaned group member %d", out.Unproven, pids[0])
	}
	if !alive(j, pids[0], child) {
		t.Error("a member of a group whose leader is gone was signalled")
	}
}

// TestIntegrationSurvivorsReported freezes a member with the cgroup v1
// freezer, where even SIGKILL waits until it is thawed.
func TestIntegrationSurvivorsReported(t *testing.T) {
	testenv.RequireRoot(t)
	td, j := newTeardown(t, 100*time.Millisecond)
	td.opts.KillWait = 300 * time.Millisecond
	cmd, pids := testenv.Shell(t, `sleep 60 & echo $!; wait`, 1)
	root := int32(cmd.Process.Pid)
	frozen := pids[0]
	thaw := testenv.Freeze(t, frozen)
	fclaim := claimOf(t, j, frozen)

	out := td.Run(context.Background(), root, claimOf(t, j, root))
	if out.Dead || !out.Escalated {
		t.Fatalf("Run = %+v, want escalated with a survivor", out)
	}
	if !slices.ContainsFunc(out.Survivors, func(m Member) bool { return m.Pid == frozen && m.Token == fclaim }) {
		t.Errorf("survivors = %+v, want %d@%s", out.Survivors, frozen, fclaim)
	}
	thaw()
	waitGone(t, j, frozen, fclaim)
}

// TestRunBoundRefusesWithoutOwned: without a bound root, a teardown runs
// only on members proven otherwise (extra handles, a cgroup) of a root
// GONE or FOREIGN; nothing else acts.
func TestRunBoundRefusesWithoutOwned(t *testing.T) {
	td := New(nil, nil, Options{})
	for _, r := range []verdict.Result{verdict.Unverifiable, verdict.Owned, verdict.Gone, verdict.Foreign, 0} {
		out := td.RunBound(context.Background(), verdict.Verdict{Result: r}, nil, nil)
		if out.Acted || out.Error == "" {
			t.Errorf("RunBound(%v) without a root or proven members = %+v, want refusal", r, out)
		}
	}
}

func TestIntegrationProtectedPids(t *testing.T) {
	td, j := newTeardown(t, time.Second)
	for _, pid := range []int32{1, int32(os.Getpid())} {
		out := td.Run(context.Background(), pid, claimOf(t, j, pid))
		if out.Acted || len(out.Signals) != 0 || !strings.Contains(out.Error, "protected") {
			t.Errorf("Run(%d) = %+v, want refusal", pid, out)
		}
	}
}

// TestIntegrationUidChangedDuringGrace: a member of nobody's tree, which
// nobody may signal when the teardown admits it, runs a setuid-root
// program when SIGTERM reaches it and is root in full before the grace
// ends. The teardown acting for nobody must not SIGKILL it: nobody could
// not, and the kernel is asked with nobody's rights at each signal. The
// root lives, so the teardown is not dead.
func TestIntegrationUidChangedDuringGrace(t *testing.T) {
	testenv.RequireRoot(t)
	helper := testenv.SetuidRoot(t)
	const nobody = 65534
	cmd, _ := testenv.Shell(t, fmt.Sprintf(`exec setpriv --reuid %d --regid %d --clear-groups sh -c 'trap "exec %s hold" TERM; sleep 1000 & echo $!; wait'`, nobody, nobody, helper), 1)
	root := int32(cmd.Process.Pid)
	td, j := newTeardown(t, 200*time.Millisecond)
	principal := uint32(nobody)
	td.opts.Principal = &principal
	uid := func() uint32 {
		ids, err := procfs.ReadUIDs("/proc", root)
		if err != nil {
			return 1<<32 - 1
		}
		return ids.Real
	}
	td.opts.OnSignal = func(m Member, sig unix.Signal, err error) {
		if m.Pid == root && sig == unix.SIGCONT && !testenv.Poll(10*time.Second, func() bool { return uid() == 0 }) {
			t.Errorf("pid %d never became root on SIGTERM", root)
		}
	}
	claim := claimOf(t, j, root)
	out := td.Run(context.Background(), root, claim)
	if !alive(j, root, claim) || uid() != 0 {
		t.Fatalf("Run = %+v: the member that became root was killed for nobody", out)
	}
	if !slices.ContainsFunc(out.Unproven, func(m Member) bool { return m.Pid == root && strings.Contains(m.Reason, "may no longer signal") }) {
		t.Errorf("unproven = %+v, want %d with the kernel's refusal", out.Unproven, root)
	}
	// The root it was asked to tear down lives: a target and a survivor,
	// the teardown not dead (kill said 0, all targeted dead, with it
	// alive).
	if !targeted(out, root) || out.Dead || !slices.ContainsFunc(out.Survivors, func(m Member) bool { return m.Pid == root }) {
		t.Errorf("Run = %+v, want %d targeted, a survivor, and the teardown not dead", out, root)
	}
}

// doubter is a Finder that, at its first look, doubts the processes it is
// given (as the graph's finder did of a child forked between its graph's
// look and its /proc walk): what the kernel cannot be made to interleave
// on demand.
type doubter struct {
	doubt []Member
	asked bool
}

func (d *doubter) Name() string { return "doubter" }

func (d *doubter) Find([]*pidfd.Handle, Budget) ([]*pidfd.Handle, []Member, error) {
	if d.asked {
		return nil, nil, nil
	}
	d.asked = true
	return nil, d.doubt, nil
}

// shortFinder is a Finder that could not bind what it saw for a want of
// descriptors (its error ErrShort, as ProcFinder's is under EMFILE, which
// TestProcFinderShort meets for real).
type shortFinder struct{ saw []Member }

func (f *shortFinder) Name() string { return "short" }

func (f *shortFinder) Find([]*pidfd.Handle, Budget) ([]*pidfd.Handle, []Member, error) {
	return nil, f.saw, ErrShort
}

// TestIntegrationShortFinderPartial: a teardown whose finder could not
// bind a candidate for a want of descriptors is Partial, with no fault,
// the candidate unproven and left alone.
func TestIntegrationShortFinderPartial(t *testing.T) {
	td, j := newTeardown(t, 2*time.Second)
	cmd, _ := testenv.Shell(t, `sleep 60`, 0)
	other, pids := testenv.Shell(t, `sleep 60 & echo $!; wait`, 1)
	defer other.Process.Kill()
	saw := Member{Pid: pids[0], Token: claimOf(t, j, pids[0]), Reason: "cannot be bound: too many open files"}
	td.finders = []Finder{&shortFinder{saw: []Member{saw}}}
	out := td.Run(context.Background(), int32(cmd.Process.Pid), claimOf(t, j, int32(cmd.Process.Pid)))
	if !out.Acted || !out.Partial || out.Error != "" || targeted(out, pids[0]) {
		t.Fatalf("Run = %+v, want acted, partial, no error, the candidate not targeted", out)
	}
	if !alive(j, saw.Pid, saw.Token) {
		t.Errorf("the unbound candidate %d was killed", saw.Pid)
	}
}

// TestIntegrationDoubtedMemberNotUnproven: a process one finder reports
// unproven and another proves a member is a member, not an unproven
// process left: a review's teardown of a root that forked in its grace
// listed its own children as "born of a process which is not a member",
// and said so (exit 2) when every process was dead.
func TestIntegrationDoubtedMemberNotUnproven(t *testing.T) {
	td, j := newTeardown(t, 2*time.Second)
	cmd, pids := testenv.Shell(t, `sleep 60 & echo $!; wait`, 1)
	root := int32(cmd.Process.Pid)
	child := Member{Pid: pids[0], Token: claimOf(t, j, pids[0]), Reason: "adopted by a member, born of a process which is not one"}
	td.finders = append([]Finder{&doubter{doubt: []Member{child}}}, td.finders...)
	out := td.Run(context.Background(), root, claimOf(t, j, root))
	if !out.Dead || !targeted(out, pids[0]) {
		t.Fatalf("Run = %+v, want dead with the child targeted", out)
	}
	if slices.ContainsFunc(out.Unproven, func(m Member) bool { return m.Pid == pids[0] }) {
		t.Errorf("the child, a proven member, is listed unproven: %+v", out.Unproven)
	}
}

// descendant waits for process pid to have one child, that child one,
// and so on for generations levels, and returns the last; with init, the
// last must be the init of a pid namespace (an unshare --fork's child).
func descendant(t *testing.T, pid int32, generations int, init bool) int32 {
	t.Helper()
	child := func(pid int32) int32 {
		var c int32
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			fmt.Sscan(f[0], &c)
		}
		return c
	}
	var d int32
	found := testenv.Poll(5*time.Second, func() bool {
		d = pid
		for i := 0; i < generations && d != 0; i++ {
			d = child(d)
		}
		if d == 0 || !init {
			return d != 0
		}
		ns, err := procfs.NSpid("/proc", d)
		return err == nil && len(ns) > 1 && ns[len(ns)-1] == 1
	})
	if !found {
		t.Fatalf("no descendant %d generations under %d (init %v)", generations, pid, init)
	}
	return d
}

// nsTestSetup skips without unshare, nsenter or cgroup2 (failing where
// privileged tests must run), and returns cgroup2's mount point.
func nsTestSetup(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	for _, name := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(name); err != nil {
			testenv.Skip(t, "%s (util-linux) is not installed", name)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	cgroot, ok := procfs.Cgroup2Mount(mi)
	if !ok {
		testenv.Skip(t, "no cgroup2 mount")
	}
	return cgroot
}

// cgroupTree runs script (which prints one pid) in a shell that first
// moves itself into a new cgroup under cgroot, and returns a Teardown
// with that cgroup's finder and the given grace.
func cgroupTree(t *testing.T, cgroot string, grace time.Duration, script string) (*Teardown, *verdict.Judge, *exec.Cmd, []int32) {
	t.Helper()
	dir, err := os.MkdirTemp(cgroot, "supervisor-test-ns-")
	if err != nil {
		t.Fatal(err)
	}
	j, err := verdict.New()
	if err != nil {
		t.Fatal(err)
	}
	td := New(j, &ProcFinder{Boot: j.Boot}, Options{Grace: grace, KillWait: 2 * time.Second, Cgroup: dir})
	cmd, pids := testenv.Shell(t, fmt.Sprintf("echo $$ > %s/cgroup.procs || exit 1; %s", dir, script), 1)
	t.Cleanup(func() {
		testenv.Poll(5*time.Second, func() bool { return os.Remove(dir) == nil })
	})
	return td, j, cmd, pids
}

// TestIntegrationNamespaceInitWithStranger: a tree in a cgroup of its own
// (so that the cgroup finder proves the children of a pid namespace's
// init, as it does a launched job's) holds the init of a pid namespace;
// root's process entered into that namespace, or one nested in it
// (nsenter), is no member. The init is refused, not signalled, since its
// death would kill that process, and the stranger lives on.
func TestIntegrationNamespaceInitWithStranger(t *testing.T) {
	cgroot := nsTestSetup(t)
	for _, tc := range []struct {
		name   string
		script string // after the cgroup: prints the pid of the outer unshare, whose child is the outer init
		nested bool
	}{
		// root sh -> unshare -> init sleep (ns 1)
		{"same namespace", `unshare --pid --fork sleep 600 & echo $!; wait`, false},
		// root sh -> unshare -> init sleep (ns 1, a sh until its exec:
		// one that waited would end, and its namespace, with its child)
		// -> unshare -> init sleep (ns 2)
		{"nested namespace", `unshare --pid --fork sh -c 'unshare --pid --fork sleep 600 & exec sleep 600' & echo $!; wait`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td, j, cmd, pids := cgroupTree(t, cgroot, time.Second, tc.script)
			root := int32(cmd.Process.Pid)
			outer, joined := descendant(t, pids[0], 1, true), descendant(t, pids[0], 1, true)
			if tc.nested {
				// outer init -> unshare -> inner init
				joined = descendant(t, outer, 2, true)
			}
			// The stranger: root's process in the (inner) namespace,
			// forked by nsenter outside the cgroup, no member's
			// descendant.
			stranger := exec.Command("nsenter", "--target", fmt.Sprint(joined), "--pid", "--", "sleep", "600")
			if err := stranger.Start(); err != nil {
				t.Fatal(err)
			}
			sleeper := descendant(t, int32(stranger.Process.Pid), 1, false)
			sclaim := claimOf(t, j, sleeper)
			t.Cleanup(func() {
				for _, pid := range []int32{sleeper, joined, outer} {
					syscall.Kill(int(pid), syscall.SIGKILL)
				}
				stranger.Wait()
			})

			out := td.Run(context.Background(), root, claimOf(t, j, root))
			if !out.Acted {
				t.Fatalf("Run = %+v, want acted", out)
			}
			refused := slices.ContainsFunc(out.Unproven, func(m Member) bool {
				return m.Pid == outer && strings.Contains(m.Reason, "pid namespace")
			})
			if !refused || targeted(out, outer) {
				t.Errorf("the outer init %d was signalled: unproven %+v, targeted %+v", outer, out.Unproven, out.Targeted)
			}
			if !out.Partial {
				t.Errorf("a teardown that left a refused init alive is not partial: its claim would close with it running")
			}
			time.Sleep(200 * time.Millisecond)
			if !alive(j, sleeper, sclaim) {
				t.Errorf("the stranger %d in the namespace of %d was killed by the teardown: outer init %d, unproven %+v, targeted %+v", sleeper, joined, outer, out.Unproven, out.Targeted)
			}
		})
	}
}

// TestIntegrationNamespaceInitEnteredDuringGrace: the init of a pid
// namespace whose namespace held only members when the teardown found it
// (so it was signalled: TERM, which an init ignores) is not killed at the
// end of the grace if a process that is no member entered its namespace
// meanwhile (root's nsenter): that process would die with it. A review's
// root process died so.
func TestIntegrationNamespaceInitEnteredDuringGrace(t *testing.T) {
	cgroot := nsTestSetup(t)
	td, j, cmd, pids := cgroupTree(t, cgroot, 2*time.Second, "unshare --pid --fork sleep 600 & echo $!; wait")
	init := descendant(t, pids[0], 1, true)
	t.Cleanup(func() { syscall.Kill(int(init), syscall.SIGKILL) })
	root := int32(cmd.Process.Pid)
	done := make(chan Outcome, 1)
	go func() { done <- td.Run(context.Background(), root, claimOf(t, j, root)) }()
	time.Sleep(500 * time.Millisecond) // in the grace: the init ignores TERM
	stranger := exec.Command("nsenter", "--target", fmt.Sprint(init), "--pid", "--", "sleep", "600")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
	sleeper := descendant(t, int32(stranger.Process.Pid), 1, false)
	t.Cleanup(func() { syscall.Kill(int(sleeper), syscall.SIGKILL) })
	sclaim := claimOf(t, j, sleeper)
	out := <-done
	if !slices.ContainsFunc(out.Unproven, func(m Member) bool { return m.Pid == init && strings.Contains(m.Reason, "end of the grace") }) || !out.Partial {
		t.Errorf("the init %d was not refused at the end of the grace (partial %v): unproven %+v, signals %v", init, out.Partial, out.Unproven, out.Signals)
	}
	time.Sleep(200 * time.Millisecond)
	if !alive(j, sleeper, sclaim) {
		t.Errorf("the process %d that entered the namespace during the grace was killed with its init", sleeper)
	}
}

// leaderExited builds (gcc) a program whose main thread exits while a
// second thread runs on: /proc shows the process a zombie, yet it lives.
func leaderExited(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Skip(t, "gcc is not installed: %v", err)
	}
	dir := testenv.BuildDir(t)
	src, bin := dir+"/leaderexit.c", dir+"/leaderexit"
	const prog = `#include <pthread.h>
#include <unistd.h>
static void *wait_forever(void *arg) { (void)arg; for (;;) pause(); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, wait_forever, 0); pthread_exit(0); }
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	return bin
}

// TestIntegrationNamespaceInitLeaderExited: a process whose main thread
// has exited while another runs shows as a zombie in /proc; entered into
// a member init's namespace, it still keeps the init from being killed
// (a review's such process, passed over as a zombie, died with the init).
func TestIntegrationNamespaceInitLeaderExited(t *testing.T) {
	cgroot := nsTestSetup(t)
	bin := leaderExited(t)
	td, j, cmd, pids := cgroupTree(t, cgroot, time.Second, "unshare --pid --fork sleep 600 & echo $!; wait")
	init := descendant(t, pids[0], 1, true)
	t.Cleanup(func() { syscall.Kill(int(init), syscall.SIGKILL) })
	stranger := exec.Command("nsenter", "--target", fmt.Sprint(init), "--pid", "--", bin)
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
	lz := descendant(t, int32(stranger.Process.Pid), 1, false)
	t.Cleanup(func() { syscall.Kill(int(lz), syscall.SIGKILL) })
	testenv.Eventually(t, 5*time.Second, func() bool {
		var st procfs.Stat
		return procfs.NewReader("/proc").ReadStat(lz, &st) == nil && st.Zombie()
	}, "the main thread of %d never exited", lz)
	root := int32(cmd.Process.Pid)
	out := td.Run(context.Background(), root, claimOf(t, j, root))
	if targeted(out, init) || !out.Partial {
		t.Errorf("the init %d was signalled (partial %v): unproven %+v", init, out.Partial, out.Unproven)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", lz)); err != nil {
		t.Errorf("the process %d, its main thread exited and another running, died with the init: %v", lz, err)
	}
}
