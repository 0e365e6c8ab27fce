package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// These tests try what one user's requests make the root daemon hold or
// do beyond that user's own processes.

// pidfds counts the pidfds process pid holds.
func pidfds(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.Contains(l, "[pidfd]") {
			n++
		}
	}
	return n
}

// TestIntegrationReleaseClosesMemberDescriptors: nobody's grant has
// recorded members; its release binds each to a pidfd for the grace and
// must close them all when the teardown ends. A release that kept them
// let one user take the daemon's descriptors, a tree at a time, until
// nobody's requests could be served.
func TestIntegrationReleaseClosesMemberDescriptors(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	before := pidfds(t, d.cmd.Process.Pid)
	const n = 20
	c := launchAs(t, d, "sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 1000 & i=$((i+1)); done; wait", n))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(d.claim(t, c.ID).Members) == n },
		"the daemon never recorded the %d members of %s", n, c.ID)
	res := release(t, d, asNobody, c.ID)
	if res.Outcome == nil || len(res.Outcome.Targeted) != n+1 || !res.Outcome.Dead {
		t.Fatalf("release of %s = %+v, want %d targeted, all dead", c.ID, res.Outcome, n+1)
	}
	if got := d.claim(t, c.ID); got.State != store.Released {
		t.Fatalf("claim %s is %s, want released", c.ID, got.State)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return pidfds(t, d.cmd.Process.Pid) <= before },
		"the daemon holds %d pidfds after the release, %d before the launch", pidfds(t, d.cmd.Process.Pid), before)
}

// launchAs launches argv as nobody and returns the claim.
func launchAs(t *testing.T, d *testDaemon, argv ...string) api.Claim {
	t.Helper()
	return claimAs(t, d, asNobody, append([]string{"launch", "--json", "--cwd", "/", "--"}, argv...)...)
}
