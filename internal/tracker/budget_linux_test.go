package tracker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestIntegrationGraphFinderBudget: the lineage finder binds no more of a
// tree than its budget allows, not even while it looks: with the
// process's descriptor limit just above the budget, a shell's 12 children
// are 4 bound members and 8 reported over the budget (binding them all at
// once meets EMFILE: "cannot be bound"), and each member returned is
// charged to the budget.
func TestIntegrationGraphFinderBudget(t *testing.T) {
	const kids, room = 12, 4
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			tr, boot := start(t, mech)
			cmd, _ := testenv.Shell(t, "i=0; while [ $i -lt 12 ]; do sleep 1000 & echo $!; i=$((i+1)); done; wait", kids)
			root, err := pidfd.Open(int32(cmd.Process.Pid), boot)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			testenv.Eventually(t, 10*time.Second, func() bool {
				d, err := tr.Graph().Descendants(root.Pid(), root.Token())
				return err == nil && len(d) == kids
			}, "the graph never held the shell's %d children", kids)

			j := &verdict.Judge{Boot: boot, Observer: tr, Mechanism: mech}
			f := tr.Finder(j)
			b := &testenv.Budget{Max: room}
			var found []*pidfd.Handle
			var unproven []actions.Member
			testenv.WithFDLimit(t, room+4, func() { // the budget, and the finder's /proc reads
				found, unproven, err = f.Find([]*pidfd.Handle{root}, b)
			})
			defer func() {
				for _, h := range found {
					h.Close()
				}
			}()
			b.CheckBudgeted(t, len(found), unproven, errors.Is(err, actions.ErrBudget), kids)
		})
	}
}

// TestIntegrationFinderSkipsZombies: a member's child that has exited and
// that the member has not reaped (a shell that exec'd and so never waits)
// is gone. The finder used to report it as an unproven live member,
// "adopted by a member, born of" the root itself, so a teardown that left
// nothing alive ended as unproven.
func TestIntegrationFinderSkipsZombies(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			tr, boot := start(t, mech)
			// The child exits only once its parent is sleep, which never
			// reaps it: a child that exited first was reaped by the shell
			// before its exec (dash collects finished jobs), and never
			// became a zombie.
			cmd, pids := testenv.Shell(t, `sh -c 'until [ "$(cat /proc/$PPID/comm)" = sleep ]; do sleep 0.01; done; exit 3' & echo $!; exec sleep 1000`, 1)
			zombie := pids[0]
			root, err := pidfd.Open(int32(cmd.Process.Pid), boot)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			testenv.Eventually(t, 10*time.Second, func() bool {
				var st procfs.Stat
				return procfs.NewReader("/proc").ReadStat(zombie, &st) == nil && st.Zombie()
			}, "child %d never became a zombie", zombie)
			if err := tr.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			j := &verdict.Judge{Boot: boot, Observer: tr, Mechanism: mech}
			found, unproven, err := tr.Finder(j).Find([]*pidfd.Handle{root}, nil)
			for _, h := range found {
				if h.Pid() == zombie {
					t.Errorf("the zombie %d was found as a member to signal", zombie)
				}
				h.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range unproven {
				t.Errorf("unproven member %d (%s); the only other process is the zombie %d", m.Pid, m.Reason, zombie)
			}
		})
	}
}
