package actions

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestProcFinderBudget: a finder given a budget never holds more
// descriptors than it allows, not even while it looks: with the process's
// descriptor limit set just above the budget, a tree of 20 children is
// found as 5 bound members and 15 reported over the budget, none of them
// "cannot be bound" (what binding all 20 at once meets: EMFILE). Each
// member returned is charged to the budget.
func TestProcFinderBudget(t *testing.T) {
	const kids, room = 20, 5
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 20 ]; do sleep 1000 & i=$((i+1)); done; echo ready; wait")
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(-cmd.Process.Pid, unix.SIGKILL); cmd.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("the tree did not start: %q %v", buf, err)
	}
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	root, err := pidfd.Open(int32(cmd.Process.Pid), boot)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	testenv.Eventually(t, 10*time.Second, func() bool {
		kidsNow, _ := procfs.Children("/proc", root.Pid())
		return len(kidsNow) == kids
	}, "the shell never had its %d children", kids)

	b := &testenv.Budget{Max: room}
	var found []*pidfd.Handle
	var unproven []Member
	// Room for the budget's descriptors and the finder's /proc reads (a
	// few at a time), not for the whole tree.
	testenv.WithFDLimit(t, room+4, func() {
		found, unproven, err = (&ProcFinder{Boot: boot}).Find([]*pidfd.Handle{root}, b)
	})
	defer func() {
		for _, h := range found {
			h.Close()
		}
	}()
	b.CheckBudgeted(t, len(found), unproven, errors.Is(err, ErrBudget), kids)
}
