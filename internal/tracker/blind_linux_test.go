package tracker

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestIntegrationTeardownSaysBlind: a teardown whose members were found
// through observed lineage says when that lineage has a hole a member
// could have escaped through, and only then. The hole the kernel makes on
// demand is a tree older than the tracker: its shell double-forked a
// sleep before the tracker started, the sleep was reparented and is not
// found, and the outcome says the shell was born before the lineage
// watched it. A loss is injected into the graph (a ring or socket that
// overflows cannot be made to on demand): a tree that lived across it is
// reported, one born after it is not.
func TestIntegrationTeardownSaysBlind(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			testenv.RequireRoot(t)
			// The old tree: the shell, and a sleep its subshell left.
			old, pids := testenv.Shell(t, "(sleep 1000 & echo $!) ; exec sleep 1000", 1)
			escaped := pids[0]
			testenv.Eventually(t, 10*time.Second, func() bool {
				var st procfs.Stat
				return procfs.NewReader("/proc").ReadStat(escaped, &st) == nil && st.PPid != int32(old.Process.Pid)
			}, "the double-forked sleep %d was never reparented", escaped)

			tr, boot := start(t, mech)
			j := &verdict.Judge{Boot: boot, Observer: tr, Mechanism: mech}
			teardown := func(pid int) actions.Outcome {
				t.Helper()
				tok := tokenOf(t, boot, int32(pid))
				if err := tr.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				out := actions.New(j, tr.Finder(j), actions.Options{Grace: 2 * time.Second}).Run(context.Background(), int32(pid), tok)
				if !out.Acted || !out.Dead {
					t.Fatalf("teardown of %d: acted %v dead %v error %q", pid, out.Acted, out.Dead, out.Error)
				}
				return out
			}
			newTree := func() int {
				c, _ := testenv.Shell(t, "sleep 1000 & echo $!; wait", 1)
				testenv.Eventually(t, 10*time.Second, func() bool {
					d, err := tr.Graph().Descendants(int32(c.Process.Pid), tokenOf(t, boot, int32(c.Process.Pid)))
					return err == nil && len(d) == 1
				}, "the graph never held the new shell's child")
				return c.Process.Pid
			}

			out := teardown(old.Process.Pid)
			if syscall.Kill(int(escaped), 0) != nil {
				t.Fatalf("the escaped sleep %d was killed: the test's premise is gone", escaped)
			}
			if !strings.Contains(out.Incomplete, "born before the lineage watched it") {
				t.Errorf("teardown of a tree older than the tracker, one of whose processes escaped: incomplete %q", out.Incomplete)
			}

			whole := newTree()
			if out := teardown(whole); out.Incomplete != "" || len(out.Targeted) != 2 {
				t.Errorf("teardown of a tree watched whole from birth: incomplete %q, %d targeted (want 2)", out.Incomplete, len(out.Targeted))
			}

			across := newTree()
			tr.Graph().Apply(&events.Event{Kind: events.Lost, Count: 1})
			after := newTree()
			if out := teardown(across); !strings.Contains(out.Incomplete, "events were lost while pid") {
				t.Errorf("teardown of a tree that lived across a loss: incomplete %q", out.Incomplete)
			}
			if out := teardown(after); out.Incomplete != "" {
				t.Errorf("teardown of a tree born after the loss: incomplete %q", out.Incomplete)
			}
		})
	}
}
