package tracker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationExecAgainNotMisread: with netlink, a shell that execs
// another program at once (sh -c 'exec sleep ...') has usually done so
// before the tracker reads /proc for the shell's exec event; what /proc
// shows then is sleep. The shell's exec event must not carry it: its
// context is the shell's or absent, and sleep's own exec event carries
// sleep's. 100 shells one after the other (before ExecFollows about 4 in
// 100 shell execs were described as sleep, so the test failed nearly
// always).
func TestIntegrationExecAgainNotMisread(t *testing.T) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	byPid := map[int32][]events.Event{}
	tr, err := Start(context.Background(), Options{Mechanism: "netlink", Boot: boot, ExecContext: func() bool { return true },
		OnEvent: func(ev *events.Event) {
			if ev.Kind == events.Exec {
				e := ev.Clone()
				mu.Lock()
				byPid[ev.Pid] = append(byPid[ev.Pid], e)
				mu.Unlock()
			}
		}})
	if err != nil {
		testenv.Skip(t, "mechanism netlink: %v", err)
	}
	defer tr.Close()
	marker := fmt.Sprintf("exec-again-%d", os.Getpid())
	shell := []string{"/bin/sh", "-c", "exec /bin/sleep 0.02", marker}
	sleep := []string{"/bin/sleep", "0.02"}
	var pids []int32
	for range 100 {
		c := exec.Command(shell[0], shell[1:]...)
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, int32(c.Process.Pid))
	}
	shellExe, err := filepath.EvalSymlinks(shell[0])
	if err != nil {
		t.Fatal(err)
	}
	shellRead, sleepRead := 0, 0
	for _, pid := range pids {
		var evs []events.Event
		testenv.Eventually(t, 10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			evs = byPid[pid]
			return len(evs) >= 2
		}, "pid %d: fewer than two exec events", pid)
		if exe := evs[0].Exe; exe != "" && exe != shellExe {
			t.Errorf("pid %d: the shell's exec carries the executable %q, want %q or none", pid, exe, shellExe)
		}
		if c := evs[0].CommString(); c != "" && c != "sh" && c != "dash" {
			t.Errorf("pid %d: the shell's exec carries the name %q, want the shell's or none", pid, c)
		}
		if first := evs[0].Argv; first != nil {
			if !slices.Equal(first, shell) {
				t.Errorf("pid %d: the shell's exec carries argv %q, want %q or none", pid, first, shell)
			}
			shellRead++
		}
		if last := evs[len(evs)-1].Argv; last != nil {
			if !slices.Equal(last, sleep) {
				t.Errorf("pid %d: sleep's exec carries argv %q, want %q or none", pid, last, sleep)
			}
			sleepRead++
		}
	}
	t.Logf("%d of %d shell execs carried their own argv, the rest none; %d sleeps theirs", shellRead, len(pids), sleepRead)
	// sleep lives 20 ms, long enough for the read nearly every time: a
	// tracker that described no exec at all would pass every check above.
	if sleepRead < len(pids)/2 {
		t.Errorf("only %d of %d sleep execs carried their argv: the context was not read", sleepRead, len(pids))
	}
}
