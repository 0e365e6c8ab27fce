package daemon

import (
	"context"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestIntegrationMembersPrunedWhenFull: a grant's member slots (8 here,
// 4,096 by default) fill with children that then exit; the children it
// starts next are recorded all the same, the exited ones forgotten to make
// room. Before, a long-running grant that starts short-lived children
// recorded its first slots' worth and then none.
func TestIntegrationMembersPrunedWhenFull(t *testing.T) {
	const slots = 8
	h := newHarnessWith(t, store.Options{Limits: store.Limits{MaxMembers: slots}})
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 8 ]; do sleep 1 & i=$((i+1)); done; read go; sleep 60 & sleep 60 & read end`)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	root := int32(cmd.Process.Pid)
	// The harness's tracker tells the daemon no events: members are the
	// graph's descendants, recorded as the daemon records them at an
	// admission (recordDescendants), here once the graph holds them.
	descendants := func(n int) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, func() bool {
			tr := h.d.tr.Load()
			tr.Sync(context.Background())
			nodes, err := tr.Graph().Descendants(root, mustTok(t, h, root))
			live := 0
			for _, nd := range nodes {
				if alive(nd.Pid) {
					live++
				}
			}
			return err == nil && live == n
		}, "the graph never held %d live children of %d", n, root)
	}
	descendants(slots)
	c := h.claim(t, cmd.Process.Pid, nil, 0)
	members := func() []store.Member {
		got, err := h.st.Get(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Members
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(members()) == slots },
		"the first %d children were never recorded: %d", slots, len(members()))
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, m := range members() {
			if alive(m.Pid) {
				return false
			}
		}
		return true
	}, "the first children never exited")
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	descendants(2)
	h.d.recordDescendants(c.ID, c.Pid, c.Token)
	testenv.Eventually(t, 10*time.Second, func() bool {
		live := 0
		for _, m := range members() {
			if alive(m.Pid) {
				live++
			}
		}
		return live == 2
	}, "the two children started once the slots were full were never recorded (members %+v)", members())
}

// mustTok returns the start token of the live process pid.
func mustTok(t *testing.T, h *harness, pid int32) token.Token {
	t.Helper()
	ph, err := pidfd.Open(pid, h.boot)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	return ph.Token()
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int32) bool {
	var st procfs.Stat
	return procfs.NewReader("/proc").ReadStat(pid, &st) == nil && !st.Zombie()
}
