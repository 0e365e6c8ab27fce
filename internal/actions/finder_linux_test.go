package actions

import (
	"errors"
	"testing"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// twentyKids starts a shell with 20 children and binds it, closed at the
// test's end.
func twentyKids(t *testing.T) (procfs.BootID, *pidfd.Handle) {
	t.Helper()
	cmd, _ := testenv.Shell(t, "i=0; while [ $i -lt 20 ]; do sleep 1000 & echo $!; i=$((i+1)); done; wait", 20)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	root, err := pidfd.Open(int32(cmd.Process.Pid), boot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return boot, root
}

// TestProcFinderBudget: a finder given a budget never holds more
// descriptors than it allows, not even while it looks: with the process's
// descriptor limit set just above the budget, a tree of 20 children is
// found as 5 bound members and 15 reported over the budget, none of them
// "cannot be bound" (what binding all 20 at once meets: EMFILE). Each
// member returned is charged to the budget.
func TestProcFinderBudget(t *testing.T) {
	const kids, room = 20, 5
	boot, root := twentyKids(t)
	var err error

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

// TestProcFinderShort: a finder that cannot bind a child for a want of
// descriptors in this process (EMFILE) reports it, unproven, and says so
// with ErrShort, which makes a teardown Partial (its claim stays open for
// a later look), not with ErrBudget or a fault.
func TestProcFinderShort(t *testing.T) {
	const kids = 20
	boot, root := twentyKids(t)
	var err error
	var found []*pidfd.Handle
	var unproven []Member
	// Room for the finder's /proc reads and a few children, no budget.
	testenv.WithFDLimit(t, 8, func() {
		found, unproven, err = (&ProcFinder{Boot: boot}).Find([]*pidfd.Handle{root}, nil)
	})
	defer func() {
		for _, h := range found {
			h.Close()
		}
	}()
	if !errors.Is(err, ErrShort) || errors.Is(err, ErrBudget) || !lacking(err) {
		t.Errorf("Find short of descriptors: err %v, want ErrShort alone", err)
	}
	if len(unproven) == 0 || len(found)+len(unproven) != kids {
		t.Errorf("Find short of descriptors: %d found, %d unproven, want %d in all, some unproven", len(found), len(unproven), kids)
	}
}

func TestLacking(t *testing.T) {
	other := errors.New("sync timed out")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{ErrBudget, true},
		{ErrShort, true},
		{lackErr(true, true), true},
		{lackErr(false, false), true},
		{errors.Join(other, ErrBudget), false},
		{errors.Join(ErrShort, other), false},
		{other, false},
	} {
		if got := lacking(tc.err); got != tc.want {
			t.Errorf("lacking(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
