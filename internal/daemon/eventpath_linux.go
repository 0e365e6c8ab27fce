package daemon

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// This file is the daemon's event path: what the tracker's drain goroutine
// calls for every event (onEvent: map lookups and non-blocking sends only),
// and the workers behind its queues, which record members and exit codes.

// held is a grant by its holder's instance, for the event path.
type held struct {
	id     string
	holder token.Token
}

// index records an open claim's pids for the event path, and has the
// holder's pidfd watched.
func (d *Daemon) index(c *store.Claim) {
	d.mu.Lock()
	if c.Pid > 0 {
		d.roots[c.Pid] = c.ID
	}
	watch := false
	if c.Holder != nil && !slices.ContainsFunc(d.holders[c.Holder.Pid], func(h held) bool { return h.id == c.ID }) {
		d.holders[c.Holder.Pid] = append(d.holders[c.Holder.Pid], held{id: c.ID, holder: c.Holder.Token})
		watch = true
	}
	if _, ok := d.deadline[c.ID]; !ok && !c.Deadline.IsZero() && c.State == store.Running {
		// Kept on the monotonic clock from the first time it is
		// indexed: a claim read back from the store has the wall
		// time only, and a clock stepped forward an hour tore down a
		// 30-minute grant after 11 s once a pass had indexed it again.
		now := d.now()
		d.deadline[c.ID] = now.Add(c.Deadline.Sub(now))
	}
	d.mu.Unlock()
	if watch && d.hw != nil {
		d.hw.add(claimShare(c), c.Holder.Pid, c.Holder.Token)
	}
}

// holderExited queues a HolderExit for every grant held by (pid, tok): the
// holder's pidfd turned readable, or was gone when it was to be watched.
func (d *Daemon) holderExited(pid int32, tok token.Token) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, h := range d.holders[pid] {
		if m, _ := token.Compare(h.holder, tok); m == token.Same {
			d.queue(h.id, HolderExit)
		}
	}
}

// unindex forgets a claim that is no longer running.
func (d *Daemon) unindex(c *store.Claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.roots[c.Pid] == c.ID {
		delete(d.roots, c.Pid)
	}
	if c.Holder != nil {
		out := slices.DeleteFunc(d.holders[c.Holder.Pid], func(h held) bool { return h.id == c.ID })
		if len(out) == 0 {
			delete(d.holders, c.Holder.Pid)
			if d.hw != nil {
				d.hw.remove(c.Holder.Pid)
			}
		} else {
			d.holders[c.Holder.Pid] = out
		}
	}
	delete(d.deadline, c.ID)
	delete(d.unwritten, c.ID)
	if p, ok := d.pending[c.Pid]; ok && p.id == c.ID {
		delete(d.pending, c.Pid)
		d.npending.Add(-1)
	}
}

// onEvent runs on the tracker's drain goroutine: map lookups and
// non-blocking sends only.
func (d *Daemon) onEvent(ev *events.Event) {
	d.log.Event(ev)
	tr := d.tr.Load()
	if tr == nil {
		return
	}
	switch ev.Kind {
	case events.Fork:
		if d.npending.Load() > 0 {
			d.admitPending(tr, ev)
		}
		// The root's own fork, applied after its admission (the launch
		// or admit came before the reader got to it), is no member.
		if root, _, ok := tr.Graph().RootOf(ev.Pid, ev.Token); ok && !d.isRoot(ev.Pid, root) {
			select {
			case d.memberQ <- memberNote{id: root, pid: ev.Pid, tok: ev.Token, par: ev.PPid, ptk: ev.ParentToken, at: time.Now().UnixNano()}:
			default:
				d.membersDropped.Add(1)
			}
		}
	case events.Exit:
		d.mu.RLock()
		// The observed exit of the holder's exact instance makes its
		// grants orphans at once; an exit the event cannot attribute
		// (no token) has the executor judge the holder instead.
		for _, h := range d.holders[ev.Pid] {
			trig := Pass
			if !ev.Token.IsZero() {
				if m, _ := token.Compare(h.holder, ev.Token); m == token.Same || (m == token.Unproven && h.holder.Start == ev.Token.Start) {
					trig = HolderExit
				} else {
					continue // another instance at the holder's pid
				}
			}
			d.queue(h.id, trig)
		}
		_, root := d.roots[ev.Pid]
		d.mu.RUnlock()
		if root {
			select {
			case d.exitQ <- exitNote{pid: ev.Pid, tok: ev.Token, status: ev.Status}:
			default:
			}
		}
	}
}

// isRoot reports whether pid is the root of claim id.
func (d *Daemon) isRoot(pid int32, id string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.roots[pid] == id
}

func (d *Daemon) admitPending(tr *tracker.Tracker, ev *events.Event) {
	d.mu.Lock()
	p, ok := d.pending[ev.Pid]
	d.mu.Unlock()
	if !ok {
		return
	}
	if err := tr.Graph().Admit(ev.Pid, p.tok, p.id); err != nil {
		return
	}
	d.mu.Lock()
	if q, ok := d.pending[ev.Pid]; ok && q.id == p.id {
		delete(d.pending, ev.Pid)
		d.npending.Add(-1)
	}
	d.mu.Unlock()
}

// admit makes (pid, tok) a root of claim id in the graph, now or, when the
// graph has not seen the fork yet, on the fork event. It returns the live
// descendants the graph already holds.
func (d *Daemon) admit(id string, pid int32, tok token.Token) {
	tr := d.tr.Load()
	g := tr.Graph()
	if err := g.Admit(pid, tok, id); err == nil {
		d.recordDescendants(id, pid, tok)
		return
	}
	d.mu.Lock()
	if _, ok := d.pending[pid]; !ok {
		d.npending.Add(1)
	}
	d.pending[pid] = pendingAdmit{tok: tok, id: id, since: time.Now()}
	d.mu.Unlock()
	// The fork may have been applied between the failed Admit and the
	// pending entry: try once more.
	if err := g.Admit(pid, tok, id); err == nil {
		d.mu.Lock()
		if q, ok := d.pending[pid]; ok && q.id == id {
			delete(d.pending, pid)
			d.npending.Add(-1)
		}
		d.mu.Unlock()
		d.recordDescendants(id, pid, tok)
	}
}

func (d *Daemon) recordDescendants(id string, pid int32, tok token.Token) {
	nodes, err := d.tr.Load().Graph().Descendants(pid, tok)
	if err != nil {
		return
	}
	for _, n := range nodes {
		select {
		case d.memberQ <- memberNote{id: id, pid: n.Pid, tok: n.Token, par: n.PPid, ptk: n.ParentToken, at: time.Now().UnixNano()}:
		default:
			d.membersDropped.Add(1)
		}
	}
}

func (d *Daemon) expirePending() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, p := range d.pending {
		if time.Since(p.since) > time.Minute {
			delete(d.pending, pid)
			d.npending.Add(-1)
		}
	}
}

// memberWriter records members in batches. Each is bound and judged first:
// a member recorded with the pidfd's token (pidfs inode included) can be
// verified by its token alone after a restart.
func (d *Daemon) memberWriter(ctx context.Context) {
	batch := map[string][]store.Member{}
	for {
		var n memberNote
		select {
		case <-ctx.Done():
			// Drain what is queued so a clean shutdown loses nothing.
			for {
				select {
				case n = <-d.memberQ:
					d.addNote(batch, n)
					continue
				default:
				}
				break
			}
			d.flushMembers(batch)
			return
		case n = <-d.memberQ:
		}
		d.addNote(batch, n)
	more:
		for i := 0; i < memberBatch; i++ {
			select {
			case n = <-d.memberQ:
				d.addNote(batch, n)
			default:
				break more
			}
		}
		d.flushMembers(batch)
	}
}

func (d *Daemon) addNote(batch map[string][]store.Member, n memberNote) {
	if n.tok.IsZero() {
		d.membersDropped.Add(1)
		return
	}
	v, h := d.judge.Bind(n.pid, n.tok)
	if h == nil {
		// Gone already (a short-lived member, the middle of a double
		// fork): nothing to find again after a restart.
		if v.Result != verdict.Gone {
			d.membersDropped.Add(1)
		}
		return
	}
	tok := h.Token()
	h.Close()
	m := store.Member{Pid: n.pid, Token: tok, Parent: n.par, ParentToken: n.ptk, BornAt: time.Unix(0, n.at)}
	batch[n.id] = append(batch[n.id], m)
}

// pruneEvery bounds how often pruneMembers looks at one claim.
const pruneEvery = time.Second

func (d *Daemon) flushMembers(batch map[string][]store.Member) {
	now := time.Now()
	for id, ms := range batch {
		added, err := d.st.AddMember(id, ms...)
		if errors.Is(err, store.ErrTooLarge) && d.pruneMembers(id, now) > 0 {
			added, err = d.st.AddMember(id, ms...)
		}
		d.membersRecorded.Add(uint64(added))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			// What was not recorded (a batch cut at the quota records
			// what fits).
			d.membersDropped.Add(uint64(max(len(ms)-added, 0)))
		}
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, api.ErrQuota),
			errors.Is(err, store.ErrTooLarge) && !errors.Is(err, store.ErrFull):
			// Recorded, a claim gone meanwhile, or the user's quota or
			// the claim's member slots: counted in membersDropped.
		default:
			// The store failed (a full disk, an I/O error): members
			// that a restart or a teardown without a cgroup cannot find
			// again, said as every store failure is.
			d.storeFailed("recording members of "+id, err)
		}
		delete(batch, id)
	}
}

// pruneMembers forgets the recorded members of claim id that are gone (or
// whose pid another process holds now), and returns how many. The member
// writer calls it when the claim's member slots (store.Limits.MaxMembers)
// are full: a long-running grant that starts short-lived children (a job
// runner) would otherwise record its first 4,096 and then none, and a
// member born later could not be found again after a restart.
//
// A claim full of live members is looked at again only after
// pruneEvery: binding thousands of members for every batch would stall
// the writer.
func (d *Daemon) pruneMembers(id string, now time.Time) int {
	if at, ok := d.pruned[id]; ok && now.Sub(at) < pruneEvery {
		return 0
	}
	if len(d.pruned) > 1024 {
		clear(d.pruned) // claims long gone; a forgotten entry costs one early look
	}
	d.pruned[id] = now
	c, err := d.st.Get(id)
	if err != nil {
		return 0
	}
	var stale []store.Instance
	for _, m := range c.Members {
		v, h := d.judge.Bind(m.Pid, m.Token)
		if h != nil {
			h.Close()
			continue
		}
		if v.Result == verdict.Gone || v.Result == verdict.Foreign {
			stale = append(stale, store.Instance{Pid: m.Pid, Token: m.Token})
		}
	}
	if len(stale) == 0 {
		return 0
	}
	n, err := d.st.RemoveMember(id, stale...)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.storeFailed("forget exited members of "+id, err)
	}
	return n
}

// exitRecorder records exit codes of jobs that are not the daemon's
// children, from exit events.
func (d *Daemon) exitRecorder(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-d.exitQ:
			d.recordEventExit(n)
		}
	}
}

func (d *Daemon) recordEventExit(n exitNote) {
	d.mu.RLock()
	id, ok := d.roots[n.pid]
	_, child := d.children[n.pid]
	_, launching := d.starting[id]
	d.mu.RUnlock()
	if !ok || launching {
		// A launch in progress hands its root's exit on itself (a shim
		// whose exec failed is no workload's exit).
		return
	}
	// No claim lock (a teardown's worker may hold it): finishJob's write
	// is conditional on the claim still being open.
	c, err := d.st.Get(id)
	if err != nil || !Open(c.State) {
		return
	}
	ctok := c.Token
	status, known := n.status, false
	if !n.tok.IsZero() {
		m, _ := token.Compare(ctok, n.tok)
		known = m == token.Same || (m == token.Unproven && ctok.Start == n.tok.Start)
	}
	if !known {
		// The event lacked a token: ask the graph which generation
		// exited.
		node, m, ok := d.tr.Load().Graph().Find(n.pid, ctok)
		if ok && (m == token.Same || m == token.Unproven) && node.Flags.Has(lineage.ExitObserved) {
			status, known = node.ExitStatus, true
		}
	}
	if !known {
		return
	}
	switch {
	case c.Kind == store.Grant:
		// The graph has applied every event before this exit, the forks
		// of the root's children included: the pass sees them all.
		d.queue(c.ID, Pass)
	case !child:
		// A launched job's status comes from wait4 (children_linux.go).
		d.finishJob(&c, syscall.WaitStatus(status), true)
	}
}
