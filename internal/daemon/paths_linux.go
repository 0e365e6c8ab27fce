package daemon

import (
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
// made for it (named after the claim, in a directory on cgroup2), else ""
// (removeCgroup does nothing with it).
func claimCgroup(c *store.Claim) string {
	if c.Cgroup == "" || filepath.Base(c.Cgroup) != c.ID || !filepath.IsAbs(c.Cgroup) {
		return ""
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(c.Cgroup), &sfs); err != nil || sfs.Type != unix.CGROUP2_SUPER_MAGIC {
		return ""
	}
	return c.Cgroup
}
