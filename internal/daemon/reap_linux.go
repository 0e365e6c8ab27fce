package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Actions named in report items.
const (
	actKeep        = "kept"
	actReadopt     = "readopted"
	actTearDown    = "torn_down"
	actDrop        = "dropped"
	actRelease     = "released"
	actRetire      = "retired"
	actExited      = "exited"
	actUnverified  = "kept_unverifiable"
	actFailed      = "failed"
	maxReportItems = 1000
)

type reapOpts struct {
	// startup: the reconcile before serving; OWNED claims are re-adopted
	// (admitted to the graph with their members).
	startup bool
	dryRun  bool
}

func final(s store.State) bool {
	switch s {
	case store.Running, store.Orphaned, store.Unverifiable:
		return false
	}
	return true
}

// reapAll judges every claim that is not final.
func (d *Daemon) reapAll(ctx context.Context, o reapOpts) api.Report {
	rep := api.Report{DryRun: o.dryRun}
	cs, err := d.st.List(store.Filter{})
	if err != nil {
		rep.Failed++
		rep.Items = append(rep.Items, api.ReportItem{Action: actFailed, Reason: err.Error()})
		return rep
	}
	for i := range cs {
		if final(cs[i].State) {
			continue
		}
		it := d.reapClaim(ctx, &cs[i], o)
		rep.Seen++
		switch it.Action {
		case actReadopt, actKeep:
			if o.startup || it.Action == actReadopt {
				rep.Readopted++
			}
		case actTearDown:
			rep.TornDown++
		case actDrop:
			rep.Foreign++
		case actRetire:
			if it.Verdict == verdict.Foreign {
				rep.Foreign++
			} else {
				rep.Unverifiable++
			}
		case actUnverified:
			rep.Unverifiable++
		case actRelease, actExited:
			rep.AlreadyGone++
		case actFailed:
			rep.Failed++
		}
		if (it.Action != actKeep || o.startup) && len(rep.Items) < maxReportItems {
			rep.Items = append(rep.Items, it)
		}
	}
	return rep
}

// reapClaim applies the verdict table to one claim.
func (d *Daemon) reapClaim(ctx context.Context, c *store.Claim, o reapOpts) api.ReportItem {
	l := d.claimLock(c.ID)
	l.Lock()
	defer l.Unlock()
	// Re-read under the lock: a release may have finished meanwhile.
	fresh, err := d.st.Get(c.ID)
	if err != nil {
		return api.ReportItem{ID: c.ID, Kind: c.Kind, Action: actFailed, Reason: err.Error()}
	}
	*c = fresh
	it := api.ReportItem{ID: c.ID, Kind: c.Kind}
	if final(c.State) {
		it.Action = actKeep
		return it
	}
	if c.Pid == 0 {
		it.Action, it.Verdict, it.Reason = actRelease, verdict.Gone, "never recorded as started (the daemon stopped during its launch)"
		if !o.dryRun {
			// A process may have started before the daemon died. In the
			// grant's own cgroup it is a member by construction: kill
			// it there. Without a cgroup nothing can prove it ours.
			if d.cg.dir != "" {
				p := filepath.Join(d.cg.dir, c.ID)
				if pids, err := cgroupProcs(p); err == nil && len(pids) > 0 {
					err := cgroupKill(p)
					d.log.Signal(logfeed.Signal{Signal: "SIGKILL", Mechanism: "cgroup.kill", Err: err})
					it.Reason += fmt.Sprintf("; killed %d processes in its cgroup", len(pids))
				}
				removeCgroup(p)
			}
			d.setFinal(c, store.Released, verdict.Verdict{Result: verdict.Gone, Reason: it.Reason}, nil)
		}
		return it
	}
	if c.Kind == store.Job {
		return d.reapJob(c, o, it)
	}
	orphan, why := false, ""
	if c.Holder != nil {
		hv := d.judge.Judge(c.Holder.Pid, c.Holder.Token)
		if hv.Result == verdict.Gone || hv.Result == verdict.Foreign {
			orphan, why = true, fmt.Sprintf("holder %d is %s (%s)", c.Holder.Pid, hv.Result, hv.Reason)
		}
	}
	it.Orphan = orphan
	v, h := d.judge.Bind(c.Pid, c.Token)
	if h != nil {
		defer h.Close()
	}
	d.log.Verdict(v)
	it.Verdict, it.Reason = v.Result, v.Reason
	if why != "" {
		it.Reason = why + "; root " + v.Reason
	}
	switch v.Result {
	case verdict.Owned:
		if !orphan {
			if o.startup && !o.dryRun {
				it.Members = d.readopt(c, h)
			}
			it.Action = actKeep
			if o.startup {
				it.Action = actReadopt
			}
			if !o.dryRun {
				d.index(c)
			}
			return it
		}
		it.Action = actTearDown
		if o.dryRun {
			return it
		}
		out := d.teardown(ctx, c, v, h, time.Duration(d.cfg.Grace))
		it.Members = len(out.Targeted)
		it.Unproven = out.Unproven
		if out.Error != "" {
			it.Reason += "; " + out.Error
		}
		return it
	case verdict.Foreign:
		it.Action = actDrop
		if !o.dryRun {
			d.setFinal(c, store.Dropped, v, nil)
		}
	case verdict.Gone:
		it.Action = actRelease
		if !o.dryRun {
			// A live group or members under a gone root: reported, not
			// signalled.
			it.Unproven = d.liveMembers(c)
			d.setFinal(c, store.Released, v, &store.Release{Dead: len(it.Unproven) == 0, Ownership: verdict.Gone, Survivors: instances(it.Unproven)})
			if len(it.Unproven) == 0 {
				removeCgroup(c.Cgroup)
			}
		}
	default:
		it.Action = actUnverified
		if !o.dryRun {
			d.record(c, store.Unverifiable, v)
			d.index(c)
		}
	}
	return it
}

func (d *Daemon) reapJob(c *store.Claim, o reapOpts, it api.ReportItem) api.ReportItem {
	v := d.judge.Judge(c.Pid, c.Token)
	d.log.Verdict(v)
	it.Verdict, it.Reason = v.Result, v.Reason
	switch v.Result {
	case verdict.Owned:
		it.Action = actKeep
		if o.startup {
			it.Action = actReadopt
		}
		if !o.dryRun {
			if o.startup {
				if tok, err := token.Parse(c.Token); err == nil {
					d.admit(c.ID, c.Pid, tok)
				}
			}
			d.index(c)
		}
	case verdict.Gone:
		// Left for exit-code pickup: the code is known if the graph saw
		// the exit, else the job ended while nobody watched.
		it.Action = actExited
		if !o.dryRun {
			d.finishJob(c, 0, false)
			d.st.Update(c.ID, func(x *store.Claim) error {
				if x.ExitCode == nil && x.ExitSignal == 0 && x.RetiredReason == "" {
					x.RetiredReason = "exited while not watched; exit code unknown"
				}
				return nil
			})
		}
	default:
		it.Action = actRetire
		if !o.dryRun {
			now := time.Now()
			d.st.Update(c.ID, func(x *store.Claim) error {
				x.State = store.Retired
				x.RetiredReason = trunc(v.Result.String()+": "+v.Reason, 2000)
				x.LastVerdict = storeVerdict(v, now)
				return nil
			})
			d.unindex(c)
		}
	}
	return it
}

func storeVerdict(v verdict.Verdict, at time.Time) *store.Verdict {
	return &store.Verdict{Result: v.Result, Reason: trunc(v.Reason, 2000), Mechanism: v.Mechanism, At: at}
}

func instances(ms []actions.Member) []store.Instance {
	var out []store.Instance
	for _, m := range ms {
		if len(out) >= 1000 {
			break
		}
		out = append(out, store.Instance{Pid: m.Pid, Token: m.Token})
	}
	return out
}

// record writes a state and a verdict, keeping the claim open.
func (d *Daemon) record(c *store.Claim, s store.State, v verdict.Verdict) {
	now := time.Now()
	d.st.Update(c.ID, func(x *store.Claim) error {
		x.State = s
		x.LastVerdict = storeVerdict(v, now)
		return nil
	})
}

// setFinal closes a claim.
func (d *Daemon) setFinal(c *store.Claim, s store.State, v verdict.Verdict, rel *store.Release) {
	now := time.Now()
	if rel != nil && rel.At.IsZero() {
		rel.At = now
	}
	if rel == nil && s == store.Released {
		rel = &store.Release{Dead: true, Ownership: v.Result, At: now}
	}
	d.st.Update(c.ID, func(x *store.Claim) error {
		x.State = s
		x.LastVerdict = storeVerdict(v, now)
		if rel != nil {
			x.Release = rel
		}
		return nil
	})
	d.unindex(c)
	if c.Cgroup != "" {
		// rmdir of a cgroup fails while it holds processes: only an
		// empty one goes.
		os.Remove(c.Cgroup)
	}
}

// readopt admits an OWNED grant's root and its members to the graph again
// after a restart: members from the grant's cgroup where it has one, else
// the members recorded as they were born, each bound and verified by its
// token. It returns how many members were found.
func (d *Daemon) readopt(c *store.Claim, root *pidfd.Handle) int {
	d.admit(c.ID, c.Pid, root.Token())
	hs := d.bindMembers(c, root.Pid())
	for _, h := range hs {
		d.admit(c.ID, h.Pid(), h.Token())
		h.Close()
	}
	return len(hs)
}

// bindMembers binds the members of a claim that verify now: the processes
// of its cgroup, or the recorded members whose tokens are OWNED. Members
// that no longer verify are forgotten.
func (d *Daemon) bindMembers(c *store.Claim, rootPid int32) []*pidfd.Handle {
	skip := map[int32]bool{rootPid: true}
	if c.Cgroup != "" {
		if _, err := os.Stat(c.Cgroup); err == nil {
			return bindCgroup(c.Cgroup, d.boot, skip)
		}
	}
	var out []*pidfd.Handle
	var stale []store.Instance
	for _, m := range c.Members {
		if skip[m.Pid] {
			continue
		}
		v, h := d.judge.Bind(m.Pid, m.Token)
		if h == nil {
			if v.Result == verdict.Gone || v.Result == verdict.Foreign {
				stale = append(stale, store.Instance{Pid: m.Pid, Token: m.Token})
			}
			continue
		}
		skip[m.Pid] = true
		out = append(out, h)
	}
	if len(stale) > 0 {
		d.st.RemoveMember(c.ID, stale...)
	}
	return out
}

// liveMembers lists members still alive under a gone root, for the report.
func (d *Daemon) liveMembers(c *store.Claim) []actions.Member {
	hs := d.bindMembers(c, c.Pid)
	var out []actions.Member
	for _, h := range hs {
		out = append(out, actions.Member{Pid: h.Pid(), Token: h.Token().String()})
		h.Close()
	}
	return out
}

// teardown tears down an OWNED root's whole tree: the members the tracker's
// lineage finds, the recorded members and the cgroup's processes, bound and
// verified. The outcome is recorded on the claim. Caller holds the claim
// lock and keeps root.
func (d *Daemon) teardown(ctx context.Context, c *store.Claim, v verdict.Verdict, root *pidfd.Handle, grace time.Duration) actions.Outcome {
	extra := d.bindMembers(c, root.Pid())
	defer func() {
		for _, h := range extra {
			h.Close()
		}
	}()
	td := &actions.Teardown{
		Judge:  d.judge,
		Finder: d.tr.Load().Finder(d.judge),
		Grace:  grace,
		OnSignal: func(m actions.Member, sig unix.Signal, err error) {
			d.log.Signal(logfeed.Signal{Pid: m.Pid, Token: m.Token, Signal: unix.SignalName(sig), Mechanism: "pidfd", Err: err})
		},
	}
	out := td.RunBound(ctx, v, root, extra)
	if c.Cgroup != "" && out.Acted {
		if pids, err := cgroupProcs(c.Cgroup); err == nil && len(pids) > 0 {
			// Everything in the grant's own cgroup is a member by
			// construction: cgroup.kill takes what escaped the walk.
			err := cgroupKill(c.Cgroup)
			d.log.Signal(logfeed.Signal{Token: c.Token, Pid: c.Pid, Signal: "SIGKILL", Mechanism: "cgroup.kill", Err: err})
		}
		removeCgroup(c.Cgroup)
	}
	d.log.Teardown(out)
	rel := &store.Release{Dead: out.Dead, Escalated: out.Escalated, Ownership: out.Verdict.Result}
	for _, s := range out.Survivors {
		if len(rel.Survivors) >= 1000 {
			break
		}
		rel.Survivors = append(rel.Survivors, store.Instance{Pid: s.Pid, Token: s.Token})
	}
	if c.Kind == store.Job {
		// The reaper or the exit event records the job's end.
		now := time.Now()
		d.st.Update(c.ID, func(x *store.Claim) error {
			x.Release = rel
			rel.At = now
			x.LastVerdict = storeVerdict(v, now)
			return nil
		})
		return out
	}
	d.setFinal(c, store.Released, v, rel)
	return out
}

// wallClock tears down claims past their deadline, if still OWNED.
func (d *Daemon) wallClock(ctx context.Context) {
	now := time.Now()
	var due []string
	d.mu.RLock()
	for id, t := range d.deadline {
		if now.After(t) {
			due = append(due, id)
		}
	}
	d.mu.RUnlock()
	sort.Strings(due)
	for _, id := range due {
		d.mu.Lock()
		delete(d.deadline, id)
		d.mu.Unlock()
		d.expire(ctx, id)
	}
}

func (d *Daemon) expire(ctx context.Context, id string) {
	l := d.claimLock(id)
	l.Lock()
	defer l.Unlock()
	c, err := d.st.Get(id)
	if err != nil || final(c.State) {
		return
	}
	v, h := d.judge.Bind(c.Pid, c.Token)
	d.log.Verdict(v)
	if h == nil {
		// Not OWNED: nothing is signalled; the reaper applies the table.
		select {
		case d.checkQ <- id:
		default:
		}
		return
	}
	defer h.Close()
	v.Reason = "wall clock of " + c.WallClock.String() + " exceeded; " + v.Reason
	d.teardown(ctx, &c, v, h, time.Duration(d.cfg.Grace))
}

// retain deletes finished claims past the retention bounds.
func (d *Daemon) retain() {
	cs, err := d.st.List(store.Filter{})
	if err != nil {
		return
	}
	now := time.Now()
	var done []store.Claim
	for _, c := range cs {
		if !final(c.State) {
			continue
		}
		owed := c.Kind == store.Job && !c.FollowedUp
		age := now.Sub(c.UpdatedAt)
		if (owed && age > time.Duration(d.cfg.RetainOwed)) || (!owed && age > time.Duration(d.cfg.RetainFinal)) {
			d.drop(c)
			continue
		}
		done = append(done, c)
	}
	if d.cfg.MaxFinal > 0 && len(done) > d.cfg.MaxFinal {
		sort.Slice(done, func(i, j int) bool { return done[i].UpdatedAt.Before(done[j].UpdatedAt) })
		for _, c := range done[:len(done)-d.cfg.MaxFinal] {
			d.drop(c)
		}
	}
}

func (d *Daemon) drop(c store.Claim) {
	if err := d.st.Delete(c.ID); err == nil && c.OutputPath != "" {
		os.Remove(c.OutputPath)
	}
	d.locks.Delete(c.ID)
}

func may(p api.Peer, c *store.Claim) bool { return p.Root() || c.UID == p.UID }

// Release implements api.Backend.
func (d *Daemon) Release(ctx context.Context, p api.Peer, id string, r *api.ReleaseRequest) (api.ReleaseResponse, error) {
	c, err := d.st.Get(id)
	if err != nil {
		return api.ReleaseResponse{}, storeErr(err)
	}
	if !may(p, &c) {
		return api.ReleaseResponse{}, forbidden("claim %s belongs to another user", id)
	}
	grace := time.Duration(d.cfg.Grace)
	if r.Grace != nil {
		grace = time.Duration(*r.Grace)
	}
	l := d.claimLock(id)
	l.Lock()
	c, err = d.st.Get(id)
	if err != nil {
		l.Unlock()
		return api.ReleaseResponse{}, storeErr(err)
	}
	var res api.ReleaseResponse
	if final(c.State) {
		l.Unlock()
		res.Claim = d.view(c)
		return res, nil
	}
	if c.Pid == 0 {
		d.setFinal(&c, store.Released, verdict.Verdict{Result: verdict.Gone, Reason: "never started"}, nil)
	} else {
		v, h := d.judge.Bind(c.Pid, c.Token)
		d.log.Verdict(v)
		switch v.Result {
		case verdict.Owned:
			out := d.teardown(ctx, &c, v, h, grace)
			h.Close()
			res.Outcome = &out
		case verdict.Foreign:
			d.setFinal(&c, store.Dropped, v, nil)
			res.Outcome = &actions.Outcome{Verdict: v}
		case verdict.Gone:
			un := d.liveMembers(&c)
			if c.Kind == store.Job {
				d.finishJob(&c, 0, false)
			} else {
				d.setFinal(&c, store.Released, v, &store.Release{Dead: len(un) == 0, Ownership: verdict.Gone, Survivors: instances(un)})
			}
			res.Outcome = &actions.Outcome{Verdict: v, Dead: len(un) == 0, Unproven: un}
		default:
			d.record(&c, store.Unverifiable, v)
			l.Unlock()
			return res, fmt.Errorf("claim %s is UNVERIFIABLE (%s); nothing was signalled: %w", id, v.Reason, api.ErrConflict)
		}
	}
	l.Unlock()
	c, err = d.st.Get(id)
	if err != nil {
		return res, storeErr(err)
	}
	res.Claim = d.view(c)
	return res, nil
}

func (d *Daemon) view(c store.Claim) api.Claim {
	ms := c.Members
	c.Members = nil
	return api.Claim{Claim: c, Members: ms}
}

// List implements api.Backend.
func (d *Daemon) List(ctx context.Context, p api.Peer) ([]api.Claim, error) {
	f := store.Filter{}
	if !p.Root() {
		uid := p.UID
		f.UID = &uid
	}
	cs, err := d.st.List(f)
	if err != nil {
		return nil, err
	}
	out := make([]api.Claim, 0, len(cs))
	for _, c := range cs {
		out = append(out, d.view(c))
	}
	return out, nil
}

// Get implements api.Backend. A job's result picked up by its caller is no
// longer owed.
func (d *Daemon) Get(ctx context.Context, p api.Peer, id string) (api.Claim, error) {
	c, err := d.st.Get(id)
	if err != nil {
		return api.Claim{}, storeErr(err)
	}
	if !may(p, &c) {
		return api.Claim{}, fmt.Errorf("claim %s: %w", id, api.ErrNotFound)
	}
	if c.Kind == store.Job && (c.State == store.Exited || c.State == store.Retired) && !c.FollowedUp {
		d.st.Update(id, func(x *store.Claim) error { x.FollowedUp = true; return nil })
		if nc, err := d.st.Get(id); err == nil {
			c = nc
		}
	}
	return d.view(c), nil
}

// Reap implements api.Backend. Only root runs the reaper (it acts on every
// claim); a dry run is open to all and shows only the caller's claims.
func (d *Daemon) Reap(ctx context.Context, p api.Peer, r *api.ReapRequest) (api.Report, error) {
	if !p.Root() && !r.DryRun {
		return api.Report{}, forbidden("only root runs the reaper")
	}
	d.reapChildren()
	rep := d.reapAll(ctx, reapOpts{dryRun: r.DryRun})
	if !p.Root() {
		cs, _ := d.st.List(store.Filter{UID: &p.UID})
		mine := map[string]bool{}
		for _, c := range cs {
			mine[c.ID] = true
		}
		items := rep.Items[:0]
		for _, it := range rep.Items {
			if mine[it.ID] {
				items = append(items, it)
			}
		}
		rep.Items = items
	}
	return rep, nil
}

// Status implements api.Backend.
func (d *Daemon) Status(ctx context.Context, p api.Peer) (api.Status, error) {
	tr := d.tr.Load()
	st := api.Status{
		Version: d.cfg.Version, Pid: os.Getpid(), Mechanism: string(tr.Mechanism()),
		Tried: tr.Tried(), StartedAt: d.started, UptimeSeconds: time.Since(d.started).Seconds(),
		Cgroup: d.cg.dir, CgroupReason: d.cg.reason,
		MembersQueued: d.membersRecorded.Load(), MembersLost: d.membersDropped.Load(),
	}
	es := tr.Stats()
	st.Events, st.LostEvents, st.Resyncs = es.Events, es.Lost, tr.Resyncs()
	st.GraphLive = tr.Graph().Stats().Live
	ss, err := d.st.Stats()
	if err != nil {
		return st, err
	}
	st.Counts, st.Claims, st.Members, st.StoreBytes = ss.Counts, ss.Claims, ss.Members, ss.FileBytes
	st.LogDropped = d.log.Stats().Dropped
	d.repMu.Lock()
	st.Reconcile = d.reconcile
	d.repMu.Unlock()
	return st, nil
}

// Verify implements api.Backend: anyone may ask; a verdict signals nothing.
func (d *Daemon) Verify(ctx context.Context, p api.Peer, r *api.ClaimRequest) (verdict.Verdict, error) {
	return d.judge.Judge(r.Pid, r.Token), nil
}

// Kill implements api.Backend. The daemon signals only an instance it
// holds: the root or a recorded member of a claim the caller may act on,
// judged OWNED and bound.
func (d *Daemon) Kill(ctx context.Context, p api.Peer, r *api.ClaimRequest) (actions.Outcome, error) {
	tok, err := token.Parse(r.Token)
	if err != nil {
		return actions.Outcome{}, badRequest("token: %v", err)
	}
	cs, err := d.st.List(store.Filter{})
	if err != nil {
		return actions.Outcome{}, err
	}
	var held *store.Claim
	for i := range cs {
		c := &cs[i]
		if final(c.State) || !may(p, c) {
			continue
		}
		if c.Pid == r.Pid && sameInstance(c.Token, tok) {
			held = c
			break
		}
		for _, m := range c.Members {
			if m.Pid == r.Pid && sameInstance(m.Token, tok) {
				held = c
				break
			}
		}
		if held == nil {
			// A member the graph attributes to the claim's root.
			if root, _, ok := d.tr.Load().Graph().RootOf(r.Pid, tok); ok && root == c.ID {
				held = c
			}
		}
		if held != nil {
			break
		}
	}
	if held == nil {
		return actions.Outcome{}, forbidden("%d@%s is not held by the supervisor for this caller", r.Pid, r.Token)
	}
	grace := time.Duration(d.cfg.Grace)
	if r.Grace != nil {
		grace = time.Duration(*r.Grace)
	}
	v, h := d.judge.Bind(r.Pid, r.Token)
	d.log.Verdict(v)
	if h == nil {
		return actions.Outcome{Verdict: v}, nil
	}
	defer h.Close()
	if held.Pid == r.Pid {
		l := d.claimLock(held.ID)
		l.Lock()
		defer l.Unlock()
		c, err := d.st.Get(held.ID)
		if err != nil {
			return actions.Outcome{}, storeErr(err)
		}
		return d.teardown(ctx, &c, v, h, grace), nil
	}
	td := &actions.Teardown{Judge: d.judge, Finder: d.tr.Load().Finder(d.judge), Grace: grace}
	out := td.RunBound(ctx, v, h, nil)
	d.log.Teardown(out)
	return out, nil
}

func sameInstance(stored string, tok token.Token) bool {
	st, err := token.Parse(stored)
	if err != nil {
		return false
	}
	m, _ := token.Compare(st, tok)
	return m == token.Same
}

// Tree implements api.Backend.
func (d *Daemon) Tree(ctx context.Context, p api.Peer, pid int32, tokText string) ([]api.TreeNode, error) {
	g := d.tr.Load().Graph()
	var tok token.Token
	if tokText != "" {
		t, err := token.Parse(tokText)
		if err != nil {
			return nil, badRequest("token: %v", err)
		}
		tok = t
	} else {
		n, ok := g.Live(pid)
		if !ok {
			return nil, fmt.Errorf("no live process %d in the graph: %w", pid, api.ErrNotFound)
		}
		tok = n.Token
	}
	w, ok := g.Watch(pid, tok)
	if !ok {
		return nil, fmt.Errorf("%d@%s is not in the graph: %w", pid, tok, api.ErrNotFound)
	}
	nodes, err := g.Descendants(pid, tok)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, api.ErrConflict)
	}
	out := []api.TreeNode{treeNode(g.RootOf, w.Node)}
	for _, n := range nodes {
		out = append(out, treeNode(g.RootOf, n))
	}
	return out, nil
}

func treeNode(rootOf func(int32, token.Token) (string, bool, bool), n lineage.Node) api.TreeNode {
	root, _, _ := rootOf(n.Pid, n.Token)
	return api.TreeNode{
		Pid: n.Pid, Token: n.Token.String(), PPid: n.PPid, Comm: n.CommString(), Root: root,
		Born: n.Flags.Has(lineage.BornObserved), Exited: !n.Live(),
	}
}
