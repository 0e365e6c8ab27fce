package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/procsupervisor/supervisor/internal/jobout"
	"github.com/procsupervisor/supervisor/internal/logfeed"
)

// discardOutput gives up the output file at path of claim id
// (jobout.Discard: taken back from its user, emptied, unlinked), and logs
// what failed.
func (d *Daemon) discardOutput(id, path string) {
	if err := jobout.Discard(path); err != nil {
		d.log.Error("dropping the output of claim "+id, err)
	}
}

// boundJobOutputs holds each job's output file to JobOutputMax bytes on
// disk until ctx ends (internal/jobout): a job writes the file itself, as
// its user, in the daemon's state directory, and one that wrote without
// end filled the filesystem the store is on, and then no user's claim
// could be written. The first time a job's output is cut, a
// job_output_bounded line says so; so does one the first time its file
// is found linked elsewhere and taken back from its user. A look that
// fails (the file cannot be opened for writing: its user's, on a
// filesystem without ACLs, under a unit without CAP_DAC_OVERRIDE) is
// counted, and logged the first time for each job and at each power of
// two of the count: before, it was dropped, and the bound stopped
// without a word.
func (d *Daemon) boundJobOutputs(ctx context.Context) {
	if d.cfg.JobOutputMax <= 0 {
		return
	}
	dir := filepath.Join(d.cfg.StateDir, "jobs")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		d.log.Error("job outputs are not bounded", err)
		return
	}
	const (
		toldBounded = 1 << iota
		toldEscaped
		toldFailed
	)
	var (
		mu     sync.Mutex
		told   = map[string]uint8{}
		failed uint64 // looks that failed, all files
	)
	// first marks what was told of the claim id, and reports whether it
	// had not been before.
	first := func(id string, what uint8) bool {
		mu.Lock()
		defer mu.Unlock()
		was := told[id]
		told[id] = was | what
		if len(told) > 4096 { // forget the claims dropped since
			for k := range told {
				if _, ok := d.claims.get(k); !ok {
					delete(told, k)
				}
			}
		}
		return was&what == 0
	}
	claimLine := func(id, reason string) {
		ev := logfeed.ClaimEvent{Action: logfeed.ActionJobOutputBounded, ClaimID: id, Kind: "job", Reason: reason}
		if m, ok := d.claims.get(id); ok {
			ev.UID, ev.Owner, ev.Pid, ev.Token = m.uid, m.owner, m.pid, m.tok
		}
		d.log.Claim(ev)
	}
	idOf := func(path string) string { return strings.TrimSuffix(filepath.Base(path), ".out") }
	err := jobout.Watch(ctx, dir, ".out", d.cfg.JobOutputMax, jobout.Reports{
		Bounded: func(path string, upTo int64) {
			if id := idOf(path); first(id, toldBounded) {
				claimLine(id, fmt.Sprintf("output past %d bytes on disk: its oldest bytes are dropped (first up to offset %d)", d.cfg.JobOutputMax, upTo))
			}
		},
		Escaped: func(path string) {
			if id := idOf(path); first(id, toldEscaped) {
				claimLine(id, "output file linked outside the jobs directory: taken back from its user (root's, mode 0, no ACL), whose job writes on through the descriptors it holds")
			}
		},
		Failed: func(path string, err error) {
			mu.Lock()
			failed++
			n := failed
			mu.Unlock()
			if first(idOf(path), toldFailed) || n&(n-1) == 0 {
				d.log.Error(fmt.Sprintf("output of job %s is not bounded (%d failed looks at job outputs so far)", idOf(path), n), err)
			}
		},
	})
	if err != nil {
		d.log.Error("job outputs are not bounded", err)
	}
}
