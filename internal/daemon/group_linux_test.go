package daemon

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationStrangersGroupNotReported: a claim's root is gone, and
// a stranger given its pid (clone3 set_tid) made itself a group leader,
// forked and exited: a process group of the root's pid lives, the
// stranger's. The claim is let go with nothing reported when its root
// never led a group (its recorded pgid is not its pid), nor when the
// group's processes are another user's than the claim's. Before, the
// stranger's process was listed as the claim's unproven member, its pid
// and token shown to the claim's owner.
func TestIntegrationStrangersGroupNotReported(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		uid  uint32
		lead bool
	}{
		{"root never led a group", 0, false},
		{"another user's group", 65534, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The stranger: root's, at the root's pid, leads a group and
			// leaves a sleep in it.
			pid, tok, s := h.reissued(t, func(pid int32) (*testenv.Spawned, error) {
				return testenv.SpawnAt(t, pid, "setsid", "sh", "-c", "sleep 60 & exit 0")
			})
			c := store.Claim{Kind: store.Grant, UID: tc.uid, Pid: pid, Token: tok}
			if tc.lead {
				c.Pgid = pid
			}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			var group []actions.Member
			testenv.Eventually(t, 10*time.Second, func() bool {
				group = actions.GroupMembers(pid)
				return len(group) == 1 && group[0].Pid != pid
			}, "the stranger's group %d never held its sleep alone: %+v", pid, group)
			t.Cleanup(func() { syscall.Kill(int(group[0].Pid), syscall.SIGKILL) })
			s.Stop()

			it, out, err := h.d.settle(context.Background(), c.ID, request{trigger: Pass})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := h.st.Get(c.ID)
			if it.Action != LetGo.String() || got.Release == nil || !got.Release.Dead || len(got.Release.Unproven) != 0 || out == nil || len(out.Unproven) != 0 {
				t.Errorf("settle of a gone root whose pid now leads a stranger's group: %s, release %+v; want let go, dead, nothing reported", it.Action, got.Release)
			}
		})
	}
}
