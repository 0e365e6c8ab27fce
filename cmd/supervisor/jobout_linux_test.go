package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationJobOutputBounded: a user's job that writes without end
// wrote its output file, in the daemon's state directory, as far as the
// filesystem went, and then no user's claim could be stored. The daemon
// now keeps the last job_output_max bytes of it on disk: the job, still
// running, writes past the bound; the disk holds about the bound; output
// gives the last bytes and says which were dropped; the feed says so once.
func TestIntegrationJobOutputBounded(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	const bound = 1 << 20
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--job-output-max", fmt.Sprint(bound))
	// 24 MiB of x, a last line, then a wait: the job is running when its
	// output is read.
	c := claimAs(t, d, asNobody, "launch", "--detach", "--json", "--cwd", "/", "--", "sh", "-c",
		`head -c 25165824 /dev/zero | tr '\0' x; echo; echo the-last-line; exec sleep 1000`)
	path := filepath.Join(state, "jobs", c.ID+".out")
	var st syscall.Stat_t
	testenv.Eventually(t, 30*time.Second, func() bool {
		return syscall.Stat(path, &st) == nil && st.Size > 24<<20 && st.Blocks*512 <= bound+(1<<20)+4096
	}, "job output %s: size %d, %d bytes on disk; want over 24 MiB written and about %d held", path, st.Size, st.Blocks*512, bound)
	code, out, errs := d.run(t, asNobody, "output", c.ID)
	if code != 0 || !strings.HasSuffix(out, "x\nthe-last-line\n") || len(out) > 2*bound+4096 || len(out) < bound {
		t.Errorf("output of a bounded job = exit %d, %d bytes ending %q; want about the last %d bytes", code, len(out), out[max(0, len(out)-30):], bound)
	}
	if !strings.Contains(errs, "were dropped") || !strings.Contains(errs, "bytes 0 to ") {
		t.Errorf("output of a bounded job said %q on stderr; want the dropped bytes named", errs)
	}
	log := filepath.Join(filepath.Dir(sock), "log.json")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Count(readFile(log), `"action":"job_output_bounded"`) == 1 && strings.Contains(readFile(log), c.ID)
	}, "no single job_output_bounded line for %s in the feed", c.ID)
}
