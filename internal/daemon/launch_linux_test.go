package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestMain lets Launch start workloads: the shim is this test binary run
// as spawn.ShimName.
func TestMain(m *testing.M) {
	spawn.Main()
	os.Exit(testenv.Main(m))
}

// TestIntegrationEarlyExitKeepsItsCode: a job whose root exits, and is
// reaped, while its launch has not returned keeps its exit code (it used
// to end as "exit code unknown" at the next pass). The launch is held
// after the exec until the reaper has run on the exited root.
func TestIntegrationEarlyExitKeepsItsCode(t *testing.T) {
	h := newHarness(t)
	reaped := false
	h.d.execDone = func(id string, pid int32) {
		testenv.Eventually(t, 10*time.Second, func() bool { return zombieOrGone(pid) }, "the job's root did not exit")
		h.d.waitChildren()
		h.d.mu.RLock()
		reaped = h.d.starting[id] != nil
		h.d.mu.RUnlock()
	}
	p := api.Peer{Pid: int32(os.Getpid())}
	cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: []string{"/bin/sh", "-c", "exit 7"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reaped {
		t.Fatal("the root's status was not left to its launch: the test did not force the race")
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

// TestIntegrationRootStoredBeforeExec: the launch stores its root before
// the workload runs, so a store that fails that write leaves nothing
// running. Before, the write came after the exec, and its failure killed
// the root alone: a child the workload had started kept running with no
// claim naming it. The write is held until the root has a child (it never
// has one now: the shim waits for the write before its exec).
func TestIntegrationRootStoredBeforeExec(t *testing.T) {
	h := newHarness(t)
	mark := fmt.Sprintf("mark-%d-%d", os.Getpid(), time.Now().UnixNano())
	marked := func() []int32 {
		var out []int32
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			var pid int32
			if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
				continue
			}
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), mark) {
				out = append(out, pid)
			}
		}
		return out
	}
	t.Cleanup(func() {
		for _, pid := range marked() {
			unix.Kill(int(pid), unix.SIGKILL)
		}
	})
	h.st.before = func(id string) {
		h.d.mu.RLock()
		var root int32
		for p, cid := range h.d.children {
			if cid == id {
				root = p
			}
		}
		h.d.mu.RUnlock()
		if root == 0 || h.st.fail.Load() {
			return
		}
		for i := 0; i < 40; i++ {
			if kids, err := procfs.Children("/proc", root); err == nil && len(kids) > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		h.st.fail.Store(true)
	}
	script := "/bin/sh -c 'sleep 1000; :' " + mark + " & wait"
	_, err := h.d.Launch(context.Background(), api.Peer{Pid: int32(os.Getpid())},
		&api.LaunchRequest{Argv: []string{"/bin/sh", "-c", script}, Detach: true})
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("launch with its root's write failing = %v, want the store's error", err)
	}
	if left := marked(); len(left) > 0 {
		t.Fatalf("processes %v of a launch that failed to store its root are running", left)
	}
}
