package tracker

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationExecContextFromProc: with ExecContext on, netlink's exec
// events and the proc poller's inferred forks carry the context /proc
// gives (argv, exe, uid), and with it off they carry none.
func TestIntegrationExecContextFromProc(t *testing.T) {
	for _, tt := range []struct {
		mech string
		kind events.Kind
		on   bool
	}{
		{"netlink", events.Exec, true},
		{"netlink", events.Exec, false},
		{"proc", events.Fork, true},
	} {
		name := tt.mech
		if !tt.on {
			name += "/off"
		}
		t.Run(name, func(t *testing.T) {
			testenv.RequireRoot(t)
			boot, _ := procfs.ReadBootID("/proc")
			var mu sync.Mutex
			got := map[int32]events.Event{}
			opts := Options{Mechanism: tt.mech, Boot: boot, OnEvent: func(ev *events.Event) {
				if ev.Kind == tt.kind {
					mu.Lock()
					got[ev.Pid] = ev.Clone() // its strings live until the next event
					mu.Unlock()
				}
			}}
			if tt.on {
				opts.ExecContext = func() bool { return true }
			}
			tr, err := Start(context.Background(), opts)
			if err != nil {
				testenv.Skip(t, "mechanism %s: %v", tt.mech, err)
			}
			defer tr.Close()
			// sh waits for sleep, keeping its argv while the source
			// reads it; it runs as nobody.
			argv := []string{"/bin/sh", "-c", "sleep 3; :", "marker", "a b"}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			pid := int32(cmd.Process.Pid)
			var ev events.Event
			testenv.Eventually(t, 10*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				var ok bool
				ev, ok = got[pid]
				return ok && (ev.Kind != events.Exec || ev.Argv != nil || !tt.on)
			}, "no %s event of %d", tt.kind, pid)
			if !tt.on {
				if ev.Ctx.Valid || ev.Argv != nil {
					t.Errorf("context off, yet the event carries %q, %+v", ev.Argv, ev.Ctx)
				}
				return
			}
			if !ev.Ctx.Valid || !slices.Equal(ev.Argv, argv) || ev.Ctx.UID != 65534 || ev.Exe == "" || ev.Exec.Cwd == "" {
				t.Errorf("%s event: argv %q exe %q cwd %q ctx %+v; want the argv, exe, cwd and uid of the process", tt.kind, ev.Argv, ev.Exe, ev.Exec.Cwd, ev.Ctx)
			}
		})
	}
}
