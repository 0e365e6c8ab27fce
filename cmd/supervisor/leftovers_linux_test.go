package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationJobLeftoversKeepItOpen: nobody's job whose root exits
// leaving a process in its cgroup stays open with its root's exit code:
// it counts as live, and its release tears that process down and ends it
// with the code. A job whose leftover exits on its own ends within
// seconds, not at the next reaper pass (30 s here). Before, the job ended
// with its root and the process ran on, unmanaged: outside nobody's
// quotas, and not even root could release it.
func TestIntegrationJobLeftoversKeepItOpen(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", strconv.Itoa(nobody))
	job := claimAs(t, d, asNobody, "launch", "--json", "--cwd", "/", "--detach", "--", "sh", "-c", "sleep 1000 & exit 3")
	if job.Cgroup == "" {
		testenv.Skip(t, "the daemon made no cgroup for %s here", job.ID)
	}
	var left []int32
	testenv.Eventually(t, 10*time.Second, func() bool {
		c := d.claim(t, job.ID)
		left = cgroupPids(job.Cgroup)
		return c.ExitCode != nil && len(left) == 1
	}, "job %s never recorded its root's exit with its sleep left in %s", job.ID, job.Cgroup)
	t.Cleanup(func() { syscall.Kill(int(left[0]), syscall.SIGKILL) })
	if c := d.claim(t, job.ID); c.State != store.Running || *c.ExitCode != 3 {
		t.Fatalf("job %s with its sleep left: state %s, exit code %d; want running, 3", job.ID, c.State, *c.ExitCode)
	}
	code, out, errs := d.run(t, asNobody, "list", "--json")
	if code != 0 || !strings.Contains(out, job.ID) {
		t.Errorf("nobody's live claims (exit %d) lack %s: %s %s", code, job.ID, out, errs)
	}
	if code, _, errs := d.run(t, asNobody, "release", "--grace", "1s", job.ID); code != 0 && code != 1 {
		t.Fatalf("nobody's release of %s: exit %d: %s", job.ID, code, errs)
	}
	testenv.Eventually(t, 15*time.Second, func() bool {
		c := d.claim(t, job.ID)
		return !alivePid(left[0]) && c.State == store.Exited && c.ExitCode != nil && *c.ExitCode == 3
	}, "job %s was not ended, its sleep %d torn down, with its root's code: %+v", job.ID, left[0], d.claim(t, job.ID))

	// A leftover that exits on its own ends the job soon after.
	short := claimAs(t, d, asNobody, "launch", "--json", "--cwd", "/", "--detach", "--", "sh", "-c", "sleep 2 & exit 0")
	testenv.Eventually(t, 12*time.Second, func() bool {
		c := d.claim(t, short.ID)
		return c.State == store.Exited && c.ExitCode != nil && *c.ExitCode == 0
	}, "job %s did not end once its sleep had: %+v", short.ID, d.claim(t, short.ID))
}

// cgroupPids lists the processes of cgroup p.
func cgroupPids(p string) []int32 {
	b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
	var out []int32
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, int32(n))
		}
	}
	return out
}

// TestIntegrationReleaseKeepsClaimWhileCgroupHeld: a job that is a pid
// namespace's maker (unshare) has, in its cgroup, that namespace's init;
// root's process entered into the namespace (nsenter) keeps the init from
// being signalled, since its death would kill the stranger. The release
// then leaves the job open (survivors), the init still in its cgroup,
// rather than closing it and leaving the init there unmanaged; once the
// stranger has gone, the reaper's next pass ends it.
func TestIntegrationReleaseKeepsClaimWhileCgroupHeld(t *testing.T) {
	testenv.RequireRoot(t)
	for _, name := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(name); err != nil {
			testenv.Skip(t, "%s (util-linux) is not installed", name)
		}
	}
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	job := claimAs(t, d, nil, "launch", "--json", "--cwd", "/", "--detach", "--", "unshare", "--pid", "--fork", "sleep", "1000")
	if job.Cgroup == "" {
		testenv.Skip(t, "the daemon made no cgroup for %s here", job.ID)
	}
	var init int32
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, p := range cgroupPids(job.Cgroup) {
			if p != job.Pid {
				init = p
			}
		}
		return init != 0
	}, "job %s's namespace init never showed in %s", job.ID, job.Cgroup)
	t.Cleanup(func() { syscall.Kill(int(init), syscall.SIGKILL) })
	stranger := exec.Command("nsenter", "--target", strconv.Itoa(int(init)), "--pid", "--", "sleep", "1000")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stranger.Process.Kill()
		stranger.Wait()
	})
	var sleeper int32
	testenv.Eventually(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", stranger.Process.Pid, stranger.Process.Pid))
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		sleeper = int32(n)
		return err == nil
	}, "nsenter %d forked no process", stranger.Process.Pid)
	t.Cleanup(func() { syscall.Kill(int(sleeper), syscall.SIGKILL) })

	if code, _, errs := d.run(t, nil, "release", "--grace", "1s", job.ID); code != 0 && code != 1 && code != 2 {
		t.Fatalf("root's release of %s: exit %d: %s", job.ID, code, errs)
	}
	c := d.claim(t, job.ID)
	if c.State != store.Survivors || !alivePid(init) || !alivePid(sleeper) {
		t.Fatalf("after the release: job %s %s, its init %d alive %v, the stranger %d alive %v; want survivors, both alive: %+v",
			job.ID, c.State, init, alivePid(init), sleeper, alivePid(sleeper), c)
	}
	// Still open at the reaper's next passes (1 s here: each tries the
	// teardown again, releasing through its grace), with the init in its
	// cgroup.
	time.Sleep(2500 * time.Millisecond)
	if c := d.claim(t, job.ID); c.State != store.Survivors && c.State != store.Releasing || !slices.Contains(cgroupPids(job.Cgroup), init) {
		t.Fatalf("job %s %s, its cgroup %v; want it open with the init %d in it", job.ID, c.State, cgroupPids(job.Cgroup), init)
	}
	syscall.Kill(int(sleeper), syscall.SIGKILL)
	testenv.Eventually(t, 15*time.Second, func() bool {
		c := d.claim(t, job.ID)
		return !alivePid(init) && c.State == store.Exited && len(cgroupPids(job.Cgroup)) == 0
	}, "job %s was not ended once the stranger had gone: init %d alive %v: %+v", job.ID, init, alivePid(init), d.claim(t, job.ID))
}
