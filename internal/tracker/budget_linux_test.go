package tracker

import (
	"errors"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/pidfd"
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
