package daemon

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestMain lets Launch start workloads: the shim is this test binary run
// as spawn.ShimName.
func TestMain(m *testing.M) {
	spawn.Main()
	os.Exit(m.Run())
}

// TestIntegrationEarlyExitKeepsItsCode: a job whose root exits, and is
// reaped, between its spawn and the store write of its pid keeps its exit
// code (it used to end as "exit code unknown" at the next pass). The
// write is held until the reaper has run on the exited root.
func TestIntegrationEarlyExitKeepsItsCode(t *testing.T) {
	h := newHarness(t)
	reaped := false
	h.st.before = func(id string) {
		h.d.mu.RLock()
		var pid int32
		for p, cid := range h.d.children {
			if cid == id {
				pid = p
			}
		}
		h.d.mu.RUnlock()
		if pid == 0 || reaped {
			return
		}
		testenv.Eventually(t, 10*time.Second, func() bool { return zombieOrGone(pid) }, "the job's root did not exit")
		h.d.waitChildren()
		reaped = true
	}
	p := api.Peer{Pid: int32(os.Getpid())}
	cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: []string{"/bin/sh", "-c", "exit 7"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reaped {
		t.Fatal("the root was not reaped before its pid was stored: the test did not force the race")
	}
	c, err := h.st.Get(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != store.Exited || c.ExitCode == nil || *c.ExitCode != 7 {
		code := "none"
		if c.ExitCode != nil {
			code = fmt.Sprint(*c.ExitCode)
		}
		t.Fatalf("claim %s: state %s, exit code %s; want exited with code 7", c.ID, c.State, code)
	}
}
