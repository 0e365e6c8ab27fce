package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// A job is over when its root has exited and its own cgroup is empty.
// The root's exit code is recorded when it comes, but while processes it
// left run in the job's cgroup (a server it started in the background, a
// child it did not wait for) the claim stays open: it counts in its
// user's quotas, shows in list, and a release tears those processes down.
// Before, the job ended with its root, and what it left ran on unmanaged,
// outside every quota, and not even root could release it. A job without
// a cgroup of its own (cgroup off) proves no such processes and ends with
// its root, as before.
//
// The daemon watches those cgroups' populated flag (cgroup.events), from
// every 50 ms to every 2 s, and queues a pass of the claim once one is
// empty: the pass finishes it (Decide). The periodic reaper is the
// backstop.

const (
	leftoverFirst = 50 * time.Millisecond
	leftoverMax   = 2 * time.Second
)

// leftover is a job whose root has exited and whose cgroup held processes.
type leftover struct {
	cgroup string
	next   time.Time
	every  time.Duration
}

// cgroupPopulated reports whether cgroup p (cgroup v2) holds a process, in
// it or below it; an unreadable cgroup (gone) holds none.
func cgroupPopulated(p string) bool {
	b, err := os.ReadFile(filepath.Join(p, "cgroup.events"))
	return err == nil && bytes.Contains(b, []byte("populated 1"))
}

// heldAfter reports whether cgroup p still holds, after a teardown, a
// process that principal may signal (its real or saved uid is
// principal's; root may signal any). One it may not (a setuid program
// the user ran, now root's) does not keep the claim open: its user could
// never end it. Processes the teardown killed can be seen in the cgroup
// for a moment after their pidfds said they had exited, so it looks
// again, for up to about a quarter of a second, before it says so.
func heldAfter(p string, principal uint32) bool {
	for wait := time.Millisecond; ; wait *= 2 {
		if !cgroupPopulated(p) {
			return false
		}
		if wait > 128*time.Millisecond {
			break
		}
		time.Sleep(wait)
	}
	return signallableIn(p, principal)
}

// signallableIn reports whether cgroup p holds a process principal may
// signal (heldAfter), or cannot be listed.
func signallableIn(p string, principal uint32) bool {
	pids, err := actions.CgroupProcs(p)
	if err != nil {
		return !os.IsNotExist(err) // unlisted: said held
	}
	for _, pid := range pids {
		ids, err := procfs.ReadUIDs("/proc", pid)
		if err == nil && (principal == 0 || ids.Real == principal || ids.Saved == principal) {
			return true
		}
	}
	return false
}

// watchLeftovers has the watcher look at claim id's cgroup: a job whose
// root exited, or a claim a teardown left processes in.
func (d *Daemon) watchLeftovers(id, cgroup string) {
	d.leftMu.Lock()
	if _, ok := d.leftovers[id]; !ok {
		d.leftovers[id] = &leftover{cgroup: cgroup, next: time.Now().Add(leftoverFirst), every: leftoverFirst}
	}
	d.leftMu.Unlock()
	select {
	case d.leftoverWake <- struct{}{}:
	default:
	}
}

// leftoverWatcher queues a pass of each watched job whose cgroup has
// emptied, until ctx ends.
func (d *Daemon) leftoverWatcher(ctx context.Context) {
	t := time.NewTimer(leftoverMax)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.leftoverWake:
		case <-t.C:
		}
		now := time.Now()
		next := now.Add(leftoverMax)
		var done []string
		d.leftMu.Lock() // the event path never takes it
		for id, l := range d.leftovers {
			if now.Before(l.next) {
				next = earlier(next, l.next)
				continue
			}
			if !cgroupPopulated(l.cgroup) {
				done = append(done, id)
				delete(d.leftovers, id)
				continue
			}
			l.every = min(2*l.every, leftoverMax)
			l.next = now.Add(l.every)
			next = earlier(next, l.next)
		}
		d.leftMu.Unlock()
		for _, id := range done {
			d.queue(id, Pass)
		}
		t.Reset(max(time.Until(next), time.Millisecond))
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
