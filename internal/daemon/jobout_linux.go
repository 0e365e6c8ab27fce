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

// boundJobOutputs holds each job's output file to JobOutputMax bytes on
// disk until ctx ends (internal/jobout): a job writes the file itself, as
// its user, in the daemon's state directory, and one that wrote without
// end filled the filesystem the store is on, and then no user's claim
// could be written. The first time a job's output is cut, a
// job_output_bounded line says so.
func (d *Daemon) boundJobOutputs(ctx context.Context) {
	if d.cfg.JobOutputMax <= 0 {
		return
	}
	dir := filepath.Join(d.cfg.StateDir, "jobs")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		d.log.Error("job outputs are not bounded", err)
		return
	}
	var mu sync.Mutex
	told := map[string]bool{}
	err := jobout.Watch(ctx, dir, ".out", d.cfg.JobOutputMax, func(path string, upTo int64) {
		id := strings.TrimSuffix(filepath.Base(path), ".out")
		mu.Lock()
		first := !told[id]
		told[id] = true
		if len(told) > 4096 { // forget the claims dropped since
			for k := range told {
				if _, ok := d.claims.get(k); !ok {
					delete(told, k)
				}
			}
		}
		mu.Unlock()
		if !first {
			return
		}
		ev := logfeed.ClaimEvent{Action: logfeed.ActionJobOutputBounded, ClaimID: id, Kind: "job",
			Reason: fmt.Sprintf("output past %d bytes on disk: its oldest bytes are dropped (first up to offset %d)", d.cfg.JobOutputMax, upTo)}
		if m, ok := d.claims.get(id); ok {
			ev.UID, ev.Owner, ev.Pid, ev.Token = m.uid, m.owner, m.pid, m.tok
		}
		d.log.Claim(ev)
	})
	if err != nil {
		d.log.Error("job outputs are not bounded", err)
	}
}
