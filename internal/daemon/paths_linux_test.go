package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestDropOwnPathsOnly: dropping a finished job truncates and removes its
// output file only when the stored path is the job's own in this daemon's
// jobs directory, and removes its cgroup only when the stored path is a
// cgroup named after it. Before, a stored path elsewhere (a damaged
// store, one restored beside another daemon's state) was emptied and
// removed as root: an audit lost a root file to the periodic prune.
func TestDropOwnPathsOnly(t *testing.T) {
	h := newHarness(t)
	jobs := filepath.Join(h.d.cfg.StateDir, "jobs")
	if err := os.MkdirAll(jobs, 0o711); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	empty := filepath.Join(t.TempDir(), "emptydir")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		out  func(id string) string
		own  bool
		cg   string
	}{
		{"its own", func(id string) string { return filepath.Join(jobs, id+".out") }, true, ""},
		{"a file elsewhere", func(string) string { return victim }, false, empty},
		{"another claim's name in jobs", func(string) string { return filepath.Join(jobs, "j-aaaaaaaaaaaa.out") }, false, ""},
		{"a path through ..", func(id string) string { return filepath.Join(jobs, "..", "jobs", "..", "victim") }, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := store.Claim{Kind: store.Job, State: store.Exited, Cgroup: tc.cg}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			path := tc.out(c.ID)
			if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			if err := h.st.Update(c.ID, func(x *store.Claim) error { x.OutputPath = path; return nil }); err != nil {
				t.Fatal(err)
			}
			c, _ = h.st.Get(c.ID)
			if h.d.ownOutput(&c) != tc.own {
				t.Errorf("ownOutput(%s) = %v, want %v", path, !tc.own, tc.own)
			}
			h.d.drop(c)
			b, err := os.ReadFile(path)
			switch {
			case tc.own && err == nil:
				t.Errorf("its own output %s was kept: %q", path, b)
			case !tc.own && (err != nil || string(b) != "keep me"):
				t.Errorf("%s, not the claim's, was touched: %q, %v", path, b, err)
			}
			if tc.cg != "" {
				if claimCgroup(&c) != "" {
					t.Errorf("claimCgroup(%s) = %q, want none: not a cgroup named after %s", tc.cg, claimCgroup(&c), c.ID)
				}
				h.d.removeFinalCgroups([]store.Claim{c})
				if _, err := os.Stat(tc.cg); err != nil {
					t.Errorf("the empty directory %s named as its cgroup was removed: %v", tc.cg, err)
				}
			}
		})
	}
}

// TestIntegrationUnstartedLaunchPaths: a daemon stopped in a launch after
// making the job's output file and cgroup, before recording them with its
// pid. The next start lets the claim go, dead with nothing reported (not
// the processes of process group 0, the kernel's threads), records both
// paths and removes the empty cgroup; the output file goes with the
// claim. Before, both stayed behind for good.
func TestIntegrationUnstartedLaunchPaths(t *testing.T) {
	h := newHarness(t)
	base := findCgroupBase("auto")
	if base.dir == "" {
		testenv.Skip(t, "no writable cgroup v2: %s", base.reason)
	}
	h.d.cg = base
	c := store.Claim{Kind: store.Job}
	if err := h.st.Put(&c); err != nil {
		t.Fatal(err)
	}
	dir, fd, err := base.create(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	t.Cleanup(func() { os.Remove(dir) })
	jobs := filepath.Join(h.d.cfg.StateDir, "jobs")
	out := filepath.Join(jobs, c.ID+".out")
	if err := os.MkdirAll(jobs, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	it, o, err := h.d.settle(context.Background(), c.ID, request{trigger: Startup})
	if err != nil || o == nil || !o.Dead || len(o.Unproven) != 0 {
		t.Fatalf("settle of an unstarted job = %+v, %+v, %v; want let go, dead, nothing unproven", it, o, err)
	}
	got, _ := h.st.Get(c.ID)
	if Open(got.State) || got.Cgroup != dir || got.OutputPath != out {
		t.Errorf("claim after settle: state %s, cgroup %q, output %q; want final, %q, %q", got.State, got.Cgroup, got.OutputPath, dir, out)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) },
		"the launch's empty cgroup %s was not removed", dir)
	h.d.drop(got)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the launch's output file %s outlived its claim: %v", out, err)
	}
}

// TestIntegrationStoredCgroupProvesOnlyItsOwn: everything a claim's
// cgroup holds is torn down with it, so a stored cgroup path the daemon
// could not have made for the claim (a damaged or edited store) proves
// nothing: neither a cgroup named otherwise nor one named after the claim
// but made by a user (a delegated subtree). Their processes live on; the
// claim's own cgroup's are torn down. Before, a store naming another
// user's cgroup had its processes signalled.
func TestIntegrationStoredCgroupProvesOnlyItsOwn(t *testing.T) {
	h := newHarness(t)
	base := findCgroupBase("auto")
	if base.dir == "" {
		testenv.Skip(t, "no writable cgroup v2: %s", base.reason)
	}
	for _, tc := range []struct {
		name  string
		dir   func(id string) string
		owner int
		own   bool
	}{
		{"its own", func(id string) string { return id }, 0, true},
		{"named otherwise", func(id string) string { return "victim-" + id }, 0, false},
		{"a user's", func(id string) string { return id }, 65534, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := store.Claim{Kind: store.Grant}
			if err := h.st.Put(&c); err != nil {
				t.Fatal(err)
			}
			dir, fd, err := base.create(tc.dir(c.ID))
			if err != nil {
				t.Fatal(err)
			}
			syscall.Close(fd)
			t.Cleanup(func() { removeCgroup(dir) })
			if err := os.Chown(dir, tc.owner, tc.owner); err != nil {
				t.Fatal(err)
			}
			if err := h.st.Update(c.ID, func(x *store.Claim) error { x.Cgroup = dir; return nil }); err != nil {
				t.Fatal(err)
			}
			p := exec.Command("sleep", "60")
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Process.Kill(); p.Wait() })
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p.Process.Pid)), 0); err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.d.settle(context.Background(), c.ID, request{trigger: ReleaseAsked}); err != nil {
				t.Fatal(err)
			}
			if tc.own {
				testenv.Eventually(t, 5*time.Second, func() bool {
					return p.Process.Signal(syscall.Signal(0)) != nil || zombie(p.Process.Pid)
				}, "the process in the claim's own cgroup survived its release")
				return
			}
			time.Sleep(300 * time.Millisecond) // a SIGTERM's delivery
			if p.Process.Signal(syscall.Signal(0)) != nil || zombie(p.Process.Pid) {
				t.Errorf("the process in %s, stored as the claim's cgroup but not one the daemon made for it, was signalled", dir)
			}
		})
	}
}
