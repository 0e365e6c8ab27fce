package tracker

import (
	"context"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationExecContextChanged: with eBPF, the exec program captures
// arguments only while Options.ExecContext says something shows them. An
// exec while it says no reaches OnEvent with its context and no
// arguments; after ExecContextChanged with a yes, the next carries them,
// and after one with a no again, the one after that does not.
func TestIntegrationExecContextChanged(t *testing.T) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var want atomic.Bool
	rec := &recorder{}
	tr, err := Start(context.Background(), Options{Mechanism: "ebpf", Boot: boot, OnEvent: rec.onEvent,
		ExecContext: want.Load})
	if err != nil {
		testenv.Skip(t, "mechanism ebpf: %v", err)
	}
	defer tr.Close()
	run := func(marker string) seen {
		t.Helper()
		cmd := exec.Command("/bin/true", marker)
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pid := int32(cmd.Process.Pid)
		var ev seen
		testenv.Eventually(t, 10*time.Second, func() bool {
			var ok bool
			ev, ok = rec.find(func(s *seen) bool { return s.kind == events.Exec && s.pid == pid })
			return ok
		}, "never: the exec of /bin/true "+marker)
		return ev
	}
	if ev := run("blobs-off-at-start"); ev.argv != nil {
		t.Errorf("exec before anything showed arguments: argv %q, want none", ev.argv)
	}
	want.Store(true)
	tr.ExecContextChanged()
	if ev := run("blobs-on"); !slices.Equal(ev.argv, []string{"/bin/true", "blobs-on"}) {
		t.Errorf("exec while arguments are shown: argv %q, want them", ev.argv)
	}
	want.Store(false)
	tr.ExecContextChanged()
	if ev := run("blobs-off-again"); ev.argv != nil {
		t.Errorf("exec after the last consumer left: argv %q, want none", ev.argv)
	}
}
