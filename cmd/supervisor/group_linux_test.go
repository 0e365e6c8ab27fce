package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationGoneLeaderGroupReported: an admitted root leads a process
// group, and a process it double-forked before the daemon started (so no
// lineage names the root as its ancestor) lives on in that group. When
// the root is killed, the claim is released with the group reported, not
// dead, and the group's process is never signalled: nothing proves it
// ours, and nothing proves it not. Before, the daemon let the claim go
// as dead with nothing reported; only the local path looked for the group.
func TestIntegrationGoneLeaderGroupReported(t *testing.T) {
	testenv.RequireRoot(t)
	gfile := filepath.Join(t.TempDir(), "g")
	root := exec.Command("sh", "-c", "(sleep 1000 & echo $! > "+gfile+"); exec sleep 1000")
	root.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Process.Kill(); root.Wait() })
	gPid, gTok := readPid(t, gfile)
	t.Cleanup(func() {
		if owned(gPid, gTok) {
			syscall.Kill(int(gPid), syscall.SIGKILL)
		}
	})
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(root.Process.Pid) + "/comm")
		return err == nil && string(b) == "sleep\n"
	}, "the root never exec'd its sleep")

	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	c := claimAs(t, d, &syscall.Credential{}, "admit", strconv.Itoa(root.Process.Pid), tokenOf(t, root.Process.Pid))
	root.Process.Kill()
	root.Wait()
	testenv.Eventually(t, 20*time.Second, func() bool { return !daemon.Open(d.claim(t, c.ID).State) },
		"the claim of the killed root %d never ended", c.Pid)
	got := d.claim(t, c.ID)
	if got.State != store.Released || got.Release == nil {
		t.Fatalf("claim %s: state %s, release %+v; want released with a release record", c.ID, got.State, got.Release)
	}
	if got.Release.Dead || !slices.ContainsFunc(got.Release.Unproven, func(in store.Instance) bool { return in.Pid == gPid }) {
		t.Errorf("release: dead %v, unproven %+v; want not dead, the group's process %d reported", got.Release.Dead, got.Release.Unproven, gPid)
	}
	if !owned(gPid, gTok) {
		t.Errorf("the group's process %d, not provably the claim's, was killed", gPid)
	}
}
