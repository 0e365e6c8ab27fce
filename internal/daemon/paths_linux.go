package daemon

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/store"
)

// The store names a claim's job output file and cgroup by path, and the
// daemon removes both as root when the claim ends. A path the daemon did
// not make (a damaged store, a state directory restored beside another
// daemon's) must not be truncated or removed: the output file must be
// the claim's own name in this daemon's jobs directory, and the cgroup a
// directory named after the claim on a cgroup2 file system (the base may
// have moved since the claim was made: the daemon's own cgroup decides it).

// ownOutput reports whether c's output path is the one the daemon gives
// a job of its: STATE_DIR/jobs/ID.out.
func (d *Daemon) ownOutput(c *store.Claim) bool {
	want := filepath.Join(d.cfg.StateDir, "jobs", c.ID+".out")
	return c.OutputPath != "" && filepath.Clean(c.OutputPath) == filepath.Clean(want)
}

// claimCgroup is c's cgroup path when it is one the daemon could have
// made for it (named after the claim, in a directory on cgroup2, both
// root's: a user given a delegated subtree owns what it makes there),
// else "". Everything a cgroup holds is proven the claim's, so the
// teardown, the restart's readoption and the removal all take the path
// from here: a store naming another cgroup (another user's processes)
// had them signalled.
func claimCgroup(c *store.Claim) string {
	if c.Cgroup == "" || filepath.Base(c.Cgroup) != c.ID || !filepath.IsAbs(c.Cgroup) || filepath.Clean(c.Cgroup) != c.Cgroup {
		return ""
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(c.Cgroup), &sfs); err != nil || sfs.Type != unix.CGROUP2_SUPER_MAGIC {
		return ""
	}
	for _, p := range []string{filepath.Dir(c.Cgroup), c.Cgroup} {
		var st unix.Stat_t
		// A cgroup already removed is no one's: removeCgroup finds
		// nothing, and a teardown nothing in it.
		if err := unix.Lstat(p, &st); err != nil && !(p == c.Cgroup && errors.Is(err, unix.ENOENT)) {
			return ""
		} else if err == nil && (st.Uid != 0 || st.Mode&unix.S_IFMT != unix.S_IFDIR) {
			return ""
		}
	}
	return c.Cgroup
}

// launchPaths records, for a claim whose launch a stopped daemon left
// unfinished (no pid recorded), the output file and the cgroup the launch
// made for it before it recorded them with the pid: its processes, if
// any, are then proven by the cgroup (what it holds is the claim's by
// construction), and the file and the cgroup are removed with the claim.
// Before, both were left behind for good.
func (d *Daemon) launchPaths(c *store.Claim) error {
	var cg, out string
	if c.Cgroup == "" && d.cg.dir != "" {
		p := filepath.Join(d.cg.dir, c.ID)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			cg = p
		}
	}
	if c.OutputPath == "" && c.Kind == store.Job {
		p := filepath.Join(d.cfg.StateDir, "jobs", c.ID+".out")
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			out = p
		}
	}
	if cg == "" && out == "" {
		return nil
	}
	return d.update(c, func(x *store.Claim) {
		if x.Pid != 0 {
			return // recorded meanwhile
		}
		if cg != "" && x.Cgroup == "" {
			x.Cgroup = cg
		}
		if out != "" && x.OutputPath == "" {
			x.OutputPath = out
		}
	})
}
