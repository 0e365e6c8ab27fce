package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationTeardownRootCharged: a teardown's worker holds its root's
// pidfd for the whole grace, and that descriptor counts against the
// members' budget of the claim's uid: with one left, a second release of
// the uid's is told to retry (ErrUnavailable, nothing changed) while the
// first waits out its grace, and starts once the first has ended and
// given the descriptor back. Before, a user's thousand releases with an
// hour's grace held a thousand descriptors outside every budget.
func TestIntegrationTeardownRootCharged(t *testing.T) {
	h := newHarness(t)
	const uid = 1000
	h.d.fds = &fdBudget{perUID: 1, total: 10, used: map[uint32]int{}}
	var cmds [2]*exec.Cmd
	var ids [2]string
	for i := range cmds {
		// Its user's, ignoring TERM: the teardown waits out its grace.
		cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; exec sleep 60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		cmds[i] = cmd
		testenv.Eventually(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm")
			return string(b) == "sleep\n"
		}, "%d never exec'd sleep", cmd.Process.Pid)
		ids[i] = h.grant(t, cmd.Process.Pid, uid).ID
	}
	used := func() int {
		h.d.fds.mu.Lock()
		defer h.d.fds.mu.Unlock()
		return h.d.fds.used[uid]
	}
	release := func(id string) error {
		_, _, err := h.d.settle(context.Background(), id, request{trigger: ReleaseAsked, async: true, grace: time.Hour})
		return err
	}
	if err := release(ids[0]); err != nil {
		t.Fatalf("first release: %v", err)
	}
	if n := used(); n != 1 {
		t.Fatalf("the first teardown holds %d descriptors of the budget, want its root's 1", n)
	}
	if err := release(ids[1]); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("second release with the budget spent = %v, want ErrUnavailable", err)
	}
	if got, _ := h.st.Get(ids[1]); got.State != "running" {
		t.Errorf("the refused release left the claim %s, want it running", got.State)
	}
	cmds[0].Process.Kill() // the first teardown's root exits: it ends
	testenv.Eventually(t, 10*time.Second, func() bool { return used() == 0 }, "the first teardown never gave its descriptor back (%d held)", used())
	if err := release(ids[1]); err != nil {
		t.Fatalf("second release once the first ended: %v", err)
	}
	cmds[1].Process.Kill()
	testenv.Eventually(t, 10*time.Second, func() bool { return used() == 0 }, "the second teardown never gave its descriptor back (%d held)", used())
}

// TestIntegrationTeardownOverBudgetStaysOpen: a release of a user's tree
// larger than the user's share of descriptors binds what the share
// allows, and the members it leaves unbound live on unsignalled: the claim
// stays open (survivors) rather than closing as dead, and each later pass
// binds, within the same share, the recorded members left, until none
// is. Before, the claim was released, dead, with those members running (a
// review's other user held the daemon's descriptors); and a survivors
// claim bound all its recorded members at once, outside the share (a
// review's 141 pidfds for a share of 20, held for the user's grace).
func TestIntegrationTeardownOverBudgetStaysOpen(t *testing.T) {
	for _, tc := range []struct {
		kind     store.Kind
		recorded bool
	}{{store.Grant, true}, {store.Grant, false}, {store.Job, true}} {
		t.Run(fmt.Sprintf("%s recorded=%v", tc.kind, tc.recorded), func(t *testing.T) {
			overBudgetStaysOpen(t, tc.kind, tc.recorded)
		})
	}
}

// overBudgetStaysOpen is TestIntegrationTeardownOverBudgetStaysOpen; with
// recorded false, the member records are forgotten before the release (a
// user's quota dropped them), and the passes find the members left by the
// lineage the graph saw, from the gone root. A job (no cgroup here) has
// its root's exit recorded while it is in survivors, and stays open (a
// review's ended as exited with 21 of its members running).
func overBudgetStaysOpen(t *testing.T, kind store.Kind, recorded bool) {
	h := newHarness(t)
	const uid, kids, share = 1000, 6, 3
	h.d.fds = &fdBudget{perUID: share, total: 10, used: map[uint32]int{}}
	// Children that ignore SIGTERM: each is killed only once bound.
	cmd := exec.Command("/bin/sh", "-c", "for i in 1 2 3 4 5 6; do (trap '' TERM; exec sleep 60) & done; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	var children []int32
	testenv.Eventually(t, 10*time.Second, func() bool {
		children, _ = procfs.Children("/proc", int32(cmd.Process.Pid))
		return len(children) == kids
	}, "%d forked %d children, want %d", cmd.Process.Pid, len(children), kids)
	// The graph has their forks: the admission records them as members
	// (the harness runs no event hook to record later forks).
	if err := h.d.tr.Load().Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := h.running(t, kind, cmd.Process.Pid, uid)
	testenv.Eventually(t, 10*time.Second, func() bool {
		return !slices.ContainsFunc(children, func(p int32) bool { return !h.recorded(c.ID, p) })
	}, "the children of %d were not all recorded as members (recorded %d, dropped %d)", cmd.Process.Pid, h.d.membersRecorded.Load(), h.d.membersDropped.Load())
	if !recorded {
		got, _ := h.st.Get(c.ID)
		var all []store.Instance
		for _, m := range got.Members {
			all = append(all, store.Instance{Pid: m.Pid, Token: m.Token})
		}
		if _, err := h.st.RemoveMember(c.ID, all...); err != nil {
			t.Fatal(err)
		}
	}
	alive := func() (n int) {
		r := procfs.NewReader("/proc")
		var st procfs.Stat
		for _, p := range children {
			// A killed one may wait to be reaped by init for a while.
			if r.ReadStat(p, &st) == nil && !st.Zombie() {
				n++
			}
		}
		return n
	}

	// The release: the root and two members (the share of three), four
	// members left.
	_, out, err := h.d.settle(context.Background(), c.ID, request{trigger: ReleaseAsked})
	if err != nil || out == nil || !out.Acted || !out.Partial || out.Dead {
		t.Fatalf("release over the budget = %+v, %v; want acted, partial, not dead (the caller's answer and the feed's line say what the record says)", out, err)
	}
	got, _ := h.st.Get(c.ID)
	if got.State != store.Survivors || got.Release == nil || got.Release.Dead {
		t.Fatalf("after a release that left members unbound the grant is %s (release %+v), want survivors, not dead", got.State, got.Release)
	}
	if n := alive(); n != kids-(share-1) {
		t.Fatalf("%d of %d members alive after the release, want %d: the ones over the share", n, kids, kids-(share-1))
	}
	if kind == store.Job {
		if err := h.d.finishJob(&got, syscall.WaitStatus(syscall.SIGKILL), true); err != nil {
			t.Fatal(err)
		}
		if got, _ := h.st.Get(c.ID); got.State != store.Survivors {
			t.Fatalf("the job's root exit recorded in survivors left it %s, want survivors", got.State)
		}
	}
	// Each pass binds three of those left, within the share.
	for _, want := range []int{1, 0} {
		if _, _, err := h.d.settle(context.Background(), c.ID, request{trigger: Pass}); err != nil {
			t.Fatalf("a pass: %v", err)
		}
		if n := alive(); n != want {
			t.Fatalf("%d members alive after a pass, want %d (three bound a pass)", n, want)
		}
	}
	want := store.Released
	if kind == store.Job {
		want = store.Exited
	}
	if got, _ := h.st.Get(c.ID); got.State != want || !got.Release.Dead {
		t.Errorf("after the last pass the claim is %s (release %+v), want %s, dead", got.State, got.Release, want)
	}
	if n := h.d.fds.used[uid]; n != 0 {
		t.Errorf("%d descriptors of uid %d's share still charged after the passes", n, uid)
	}
}
