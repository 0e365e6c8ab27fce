package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
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
