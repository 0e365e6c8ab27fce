package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// This file is the executor of the verdict table (table.go): it gathers a
// claim's inputs (verdicts on the root and the holder, the members that
// live on), asks Decide, and carries the decision out, writing every state
// change to the store before the in-memory index follows it.

const maxReportItems = 1000

// request is one call of the executor.
type request struct {
	trigger Trigger
	dryRun  bool
	// grace overrides the configured grace period of a teardown.
	grace time.Duration
	// principal is the uid a teardown acts for, when not the claim's own
	// (a kill asked by another root caller is still root's).
	principal *uint32
	// async: the caller (the main loop) does not wait for a teardown, and
	// skips a claim whose teardown is in progress instead of waiting.
	async bool
	// passOver: a pass over many claims (root's reap) that reports a
	// teardown in progress instead of joining it: joined, one user's hour
	// of grace held root's reap for that hour.
	passOver bool
	// cause is why the claim is let go, for its release record.
	cause string
	// say, when set, is told a teardown's steps (its worker's).
	say func(string)
	// graceEnd, when set, is the teardown's worker's (Options.GraceEnd).
	graceEnd *actions.GraceEnd
	// uid, when set, limits reconcileAll to that uid's open claims.
	uid *uint32
	// byShare, when set, gets a report of its own for each uid whose
	// quotas claims count against (claimShare): what Status shows a user.
	byShare map[uint32]*api.Report
	// over are members a teardown starts without, not bound for want of
	// the user's share of descriptors: reported, and the outcome partial.
	over []actions.Member
}

// reconcileAll applies the table to every open claim.
func (d *Daemon) reconcileAll(ctx context.Context, rq request) api.Report {
	rep := api.Report{DryRun: rq.dryRun}
	if tr := d.tr.Load(); tr != nil {
		rep.Mechanism = string(tr.Mechanism())
	}
	var ids []string
	var shares map[string]uint32 // with rq.byShare: each id's
	if rq.byShare != nil {
		shares = map[string]uint32{}
	}
	if rq.uid != nil {
		// From the index: the cost follows the uid's claims, not the
		// store's.
		all, _ := d.claims.page(api.ListQuery{}, rq.uid)
		for _, id := range all {
			if d.claims.has(id) {
				ids = append(ids, id)
			}
		}
	} else {
		cs, err := d.st.List(store.Filter{})
		if err != nil {
			d.storeFailed("list claims", err)
			rep.Failed++
			rep.Items = append(rep.Items, api.ReportItem{Action: "failed", Reason: err.Error()})
			return rep
		}
		for i := range cs {
			if Open(cs[i].State) {
				ids = append(ids, cs[i].ID)
				if rq.byShare != nil {
					shares[cs[i].ID] = claimShare(&cs[i])
				}
			}
		}
		if !rq.dryRun {
			d.removeFinalCgroups(cs)
		}
	}
	for _, id := range ids {
		it, _, err := d.settle(ctx, id, rq)
		add(&rep, it, err, rq.trigger)
		if share, ok := shares[id]; ok {
			r := rq.byShare[share]
			if r == nil {
				r = &api.Report{DryRun: rq.dryRun, Mechanism: rep.Mechanism}
				rq.byShare[share] = r
			}
			add(r, it, err, rq.trigger)
		}
	}
	return rep
}

// reconcileStart reconciles every open claim before the daemon serves,
// and keeps the report for Status: whole for root, and for each uid the
// part of the claims that count against its quotas.
func (d *Daemon) reconcileStart(ctx context.Context) api.Report {
	byShare := map[uint32]*api.Report{}
	rep := d.reconcileAll(ctx, request{trigger: Startup, async: true, byShare: byShare})
	d.repMu.Lock()
	d.reconcile, d.reconcileOf = rep, byShare
	d.repMu.Unlock()
	return rep
}

// inProgress is the reason of a claim a pass went over because its
// teardown was in progress.
const inProgress = "a teardown is in progress"

// add counts one claim's outcome in a report and keeps its item when the
// report keeps such items and has room: not a pass's claims kept as they
// were, but for one it went over, whose teardown runs on.
func add(rep *api.Report, it api.ReportItem, err error, trig Trigger) {
	rep.Seen++
	count(rep, it, err, trig)
	if (it.Action != Keep.String() || trig == Startup || it.Reason == inProgress) && len(rep.Items) < maxReportItems {
		rep.Items = append(rep.Items, it)
	}
}

// removeFinalCgroups removes the cgroups of the finished claims among cs
// that are empty now: a job's whose members outlived it (removeCgroup gave
// up while they ran), one a daemon stopped before it removed. A cgroup that
// still holds a process cannot be removed (EBUSY) and is tried again next
// pass; one removed, or gone, is not looked at again (cgGone, which keeps
// only the claims still stored). Only cgroups the claims recorded are
// touched: daemons that share a cgroup parent leave each other's alone.
func (d *Daemon) removeFinalCgroups(cs []store.Claim) {
	d.cgMu.Lock()
	defer d.cgMu.Unlock()
	gone := make(map[string]bool, len(d.cgGone))
	for i := range cs {
		c := &cs[i]
		if Open(c.State) || c.Cgroup == "" {
			continue
		}
		if d.cgGone[c.ID] {
			gone[c.ID] = true
			continue
		}
		cg := claimCgroup(c)
		if cg == "" {
			gone[c.ID] = true // not the daemon's to remove
			continue
		}
		if err := os.Remove(cg); err == nil || errors.Is(err, os.ErrNotExist) {
			gone[c.ID] = true
		}
	}
	d.cgGone = gone
}

// count adds one claim's outcome to a report.
func count(rep *api.Report, it api.ReportItem, err error, trig Trigger) {
	if err != nil && !errors.Is(err, api.ErrConflict) {
		rep.Failed++
		return
	}
	switch it.Action {
	case Readopt.String():
		rep.Readopted++
	case Keep.String():
		// At startup a kept claim was readopted; one kept for the
		// members of a root that has gone (or whose pid was reissued)
		// counts as its root does.
		switch {
		case trig != Startup:
		case it.Verdict == verdict.Gone:
			rep.AlreadyGone++
		case it.Verdict == verdict.Foreign:
			rep.Foreign++
		default:
			rep.Readopted++
		}
	case TearDown.String():
		if it.Failed {
			rep.Failed++
		} else {
			rep.TornDown++
		}
	case Drop.String():
		rep.Foreign++
	case Retire.String():
		if it.Verdict == verdict.Foreign {
			rep.Foreign++
		} else {
			rep.Unverifiable++
		}
	case Hold.String(), Refuse.String():
		rep.Unverifiable++
	case LetGo.String(), Finish.String():
		rep.AlreadyGone++
	}
}

// settle judges one claim and carries out the table's decision, under the
// claim's lock. The outcome is set when a teardown ran. The error is
// api.ErrConflict for a refused release, or a store failure.
func (d *Daemon) settle(ctx context.Context, id string, rq request) (api.ReportItem, *actions.Outcome, error) {
	if w := d.work.get(id); w != nil {
		if rq.async || rq.dryRun || rq.passOver {
			return api.ReportItem{ID: id, Action: Keep.String(), Reason: inProgress}, nil, nil
		}
		if w.hurry(rq.grace) {
			d.shortenGrace(id, rq.grace)
		}
		return w.wait(ctx)
	}
	l := d.claimLock(id)
	if !rq.async {
		l.Lock()
	} else if !l.TryLock() {
		// A launch or a teardown holds it: the next pass looks again.
		return api.ReportItem{ID: id, Action: Keep.String(), Reason: "busy"}, nil, nil
	}
	handed := false // the claim's lock goes to a teardown's worker
	defer func() {
		if !handed {
			l.Unlock()
		}
	}()
	c, err := d.st.Get(id)
	if err != nil {
		d.storeFailed("read claim "+id, err)
		return api.ReportItem{ID: id, Action: "failed", Reason: err.Error()}, nil, storeErr(err)
	}
	it := api.ReportItem{ID: c.ID, Kind: c.Kind}
	in := Input{Kind: c.Kind, State: c.State, Trigger: rq.trigger, Started: c.Pid != 0}
	if !Open(c.State) {
		it.Action = Keep.String()
		return it, nil, nil
	}

	var v verdict.Verdict
	var root *pidfd.Handle
	var why string
	if in.Started {
		if c.Holder != nil && c.Kind == store.Grant {
			if rq.trigger == HolderExit {
				in.Orphan, why = true, fmt.Sprintf("holder %d@%s exited", c.Holder.Pid, c.Holder.Token)
			} else if hv := d.judge.Judge(c.Holder.Pid, c.Holder.Token); hv.Result == verdict.Gone || hv.Result == verdict.Foreign {
				in.Orphan, why = true, fmt.Sprintf("holder %d is %s (%s)", c.Holder.Pid, hv.Result, hv.Reason)
			}
		}
		v, root = d.judge.Bind(c.Pid, c.Token)
		defer func() {
			if root != nil { // nil once a worker owns it
				root.Close()
			}
		}()
		if v.Transient {
			// The judge ran short of a resource (descriptors, memory):
			// nothing is known of the root, and no state may change on
			// that (a job would be retired for good, a grant marked
			// unverifiable). The next pass judges it again; a request is
			// told to retry.
			d.log.VerdictFor(c.ID, v)
			it.Action, it.Verdict, it.Reason = "failed", v.Result, "not judged: "+v.Reason
			return it, nil, fmt.Errorf("claim %s not judged: %s: %w", c.ID, v.Reason, api.ErrUnavailable)
		}
		// A periodic pass logs a verdict only when it changed: a quiet
		// host makes a quiet feed.
		if rq.trigger != Pass || c.LastVerdict == nil || c.LastVerdict.Result != v.Result {
			d.log.VerdictFor(c.ID, v)
		}
		in.Root = v.Result
	} else {
		v = verdict.Verdict{Result: verdict.Gone, Reason: "never recorded as started (the daemon stopped during its launch)", Mechanism: string(d.tr.Load().Mechanism())}
		if err := d.launchPaths(&c); err != nil {
			return it, nil, err
		}
	}
	switch rq.trigger {
	case WallClock:
		ev := claimEvent(logfeed.ActionWallClock, &c)
		ev.Reason = "wall clock of " + c.WallClock.String() + " exceeded"
		d.log.Claim(ev)
	case HolderExit:
		if c.Holder != nil {
			ev := claimEvent(logfeed.ActionHolderExited, &c)
			ev.Pid, ev.Token = c.Holder.Pid, c.Holder.Token
			d.log.Claim(ev)
		}
	}
	it.Orphan = in.Orphan
	it.Verdict, it.Reason = v.Result, v.Reason
	if why != "" {
		it.Reason = why + "; root: " + v.Reason
	}
	if rq.trigger == WallClock {
		it.Reason = "wall clock of " + c.WallClock.String() + " exceeded; " + it.Reason
	}

	// Members that outlive a root that is not OWNED: the cgroup's and the
	// survivors' are proven, recorded ones only reported.
	var members []*pidfd.Handle
	var unproven, over []actions.Member
	memberFDs := d.fds.forUID(claimShare(&c))
	memberCharge := 0 // of memberFDs, by members: given back with them
	defer func() {
		for _, h := range members {
			h.Close()
		}
		if memberFDs != nil && memberCharge > 0 {
			memberFDs.Give(memberCharge)
		}
	}()
	if root == nil {
		var proven, short bool
		members, unproven, over, proven, short, memberCharge = d.orphanedMembers(&c, memberFDs)
		in.Proven = proven
		if short {
			// Whether members outlive the root could not be told for
			// want of descriptors or memory: deciding on "none" would
			// end a claim whose members run on. As for the root's
			// verdict: decided at the next pass.
			it.Action, it.Reason = "failed", "not judged: its members could not be looked at (the daemon ran short of descriptors or memory)"
			return it, nil, fmt.Errorf("claim %s not judged: its members could not be looked at: %w", c.ID, api.ErrUnavailable)
		}
	}

	dec := Decide(in)
	rq.cause = Cause(rq.trigger, in.Orphan, in.Root)
	it.Action = dec.Action.String()
	if rq.dryRun {
		return it, nil, nil
	}
	now := d.now()
	switch dec.Action {
	case Keep, Readopt:
		if dec.Action == Readopt {
			it.Members = d.readopt(&c, root)
		}
		if c.Kind == store.Job && v.Result != verdict.Owned {
			// Kept for what its root left in its cgroup: finished once
			// they have gone.
			if cg := claimCgroup(&c); cg != "" {
				d.watchLeftovers(c.ID, cg)
			}
		}
		// Written when the state or the root's verdict changed: a grant
		// kept for its members once its root has gone says GONE (list
		// and show said the OWNED of its launch), and a quiet pass over
		// an unchanged claim writes nothing.
		if c.State != dec.State || c.LastVerdict == nil || c.LastVerdict.Result != v.Result {
			if err := d.write(&c, dec.State, v, nil); err != nil {
				return it, nil, err
			}
		}
		d.index(&c)
		return it, nil, nil
	case TearDown:
		if root == nil && len(members) == 0 && len(over) > 0 {
			// Members live, and none could be bound within the user's
			// share: nothing to start on until descriptors come back.
			it.Action, it.Reason = "failed", "not started: the teardowns of this user hold all the descriptors they may"
			return it, nil, fmt.Errorf("claim %s: teardown not started: the teardowns of uid %d hold all the descriptors they may: %w",
				c.ID, claimShare(&c), api.ErrUnavailable)
		}
		rq.over = over
		grace := d.graceFor(&c, rq)
		// The root's pidfd, held by the worker for the whole grace, counts
		// against the members' budget of the claim's uid as its members'
		// do: a user's thousand releases with an hour's grace held a
		// thousand descriptors beyond it. With none left the teardown
		// waits for the next pass (a request is told to retry).
		var charged actions.Budget
		if b := d.fds.forUID(claimShare(&c)); root != nil && b != nil {
			if !b.Take() {
				it.Action, it.Reason = "failed", "not started: the teardowns of this user hold all the descriptors they may"
				return it, nil, fmt.Errorf("claim %s: teardown not started: the teardowns of uid %d hold all the descriptors they may: %w",
					c.ID, claimShare(&c), api.ErrUnavailable)
			}
			charged = b
		}
		d.tearing.Store(c.ID, struct{}{}) // until the teardown's outcome is written
		if err := d.update(&c, func(x *store.Claim) {
			x.State = store.Releasing
			x.GraceUntil, x.Grace = now.Add(grace), grace
			x.LastVerdict = storeVerdict(v, now)
		}); err != nil {
			d.tearing.Delete(c.ID)
			if charged != nil {
				charged.Give(1)
			}
			return it, nil, err
		}
		rootH, extra, extraCharged := root, members, memberCharge
		root, members, memberCharge = nil, nil, 0
		handed = true
		wit := it // the worker's copy: this goroutine goes on with its own
		w, started := d.work.start(c.ID, func(wctx context.Context, say func(string), end *actions.GraceEnd) (api.ReportItem, actions.Outcome, error) {
			defer l.Unlock()
			defer d.tearing.Delete(c.ID) // teardown's own, but for a panic
			defer func() {
				for _, h := range append(extra, rootH) {
					if h != nil {
						h.Close()
					}
				}
				if charged != nil {
					charged.Give(1)
				}
				if memberFDs != nil && extraCharged > 0 {
					memberFDs.Give(extraCharged)
				}
			}()
			rq := rq
			rq.say, rq.graceEnd = say, end
			out, err := d.teardown(wctx, &c, v, rootH, extra, rq, grace)
			it := wit
			it.Members, it.Unproven, it.Failed = len(out.Targeted), out.Unproven, !out.Dead
			if out.Error != "" {
				it.Reason += "; " + out.Error
			}
			return it, out, err
		})
		if !started {
			// Cannot happen while this holds the claim's lock (the
			// worker holds it); were it to, the worker's outcome is ours.
			handed = false
			root, members, memberCharge = rootH, extra, extraCharged
			d.tearing.Delete(c.ID)
			if charged != nil {
				charged.Give(1)
			}
		}
		if rq.async {
			it.Reason += "; teardown started"
			return it, nil, nil
		}
		return w.wait(ctx)
	case Drop, Hold, Refuse:
		if err := d.write(&c, dec.State, v, nil); err != nil {
			return it, nil, err
		}
		if dec.Action == Refuse {
			return it, &actions.Outcome{Verdict: v}, fmt.Errorf("claim %s is %s (%s); nothing was signalled: %w", c.ID, v.Result, v.Reason, api.ErrConflict)
		}
		return it, &actions.Outcome{Verdict: v}, nil
	case LetGo:
		// A live group or recorded members under a gone root: reported,
		// never signalled. The group is looked for only under a GONE
		// root that led one when claimed: while any process is in the
		// group of its pid the kernel does not reissue the pid, so a
		// root that is FOREIGN left no group, and one at its pid now is
		// the stranger's. A group at the pid of a root that never led
		// one is a stranger's too (given the pid after the root's end,
		// it made a group and left), and so may be a leader's, that
		// way: of a claim but root's, only the processes of the claim's
		// user are listed, the pids and tokens of no other user's shown.
		if v.Result == verdict.Gone && c.Pid > 0 && c.Pgid == c.Pid {
			said := make(map[int32]bool, len(unproven))
			for _, m := range unproven {
				said[m.Pid] = true
			}
			for _, m := range actions.GroupMembers(c.Pid) {
				if !said[m.Pid] && (c.UID == 0 || procUser(m.Pid, c.UID)) {
					unproven = append(unproven, m)
				}
			}
		}
		it.Unproven = unproven
		rel := &store.Release{Dead: len(unproven) == 0, Ownership: v.Result, At: now, Cause: rq.cause}
		rel.Unproven, rel.UnprovenTotal = instances(unproven)
		if err := d.write(&c, dec.State, v, rel); err != nil {
			return it, nil, err
		}
		if c.Cgroup != "" && len(unproven) == 0 {
			go removeCgroup(claimCgroup(&c)) // it may wait for exiting members
		}
		return it, &actions.Outcome{Verdict: v, Dead: rel.Dead, Unproven: unproven}, nil
	case Finish:
		err := d.finishJob(&c, 0, false)
		return it, &actions.Outcome{Verdict: v, Dead: true}, err
	case Retire:
		err := d.update(&c, func(x *store.Claim) {
			x.State = store.Retired
			x.RetiredReason = api.Trunc(v.Result.String()+": "+v.Reason, 2000)
			x.LastVerdict = storeVerdict(v, now)
		})
		return it, &actions.Outcome{Verdict: v}, err
	}
	return it, nil, fmt.Errorf("claim %s: the table decided %v, which the executor does not know", c.ID, dec.Action)
}

// procUser reports whether process pid's real or effective uid is uid.
func procUser(pid int32, uid uint32) bool {
	ids, err := procfs.ReadUIDs("/proc", pid)
	return err == nil && (ids.Real == uid || ids.Effective == uid)
}

// orphanedMembers binds what lives on of a claim whose root is not OWNED:
// the processes of its own cgroup, the survivors of an earlier teardown
// and, for a claim already releasing or left with survivors (a teardown
// decided on it, which may have left members unbound), its recorded
// members, when they still verify, are proven; otherwise recorded
// members that verify are only reported (a live group under a gone
// leader is not killed). Handles are bound within b, taken of it; what b
// refuses is over: members of a resumed teardown left unbound.
func (d *Daemon) orphanedMembers(c *store.Claim, b actions.Budget) (proven []*pidfd.Handle, unproven, over []actions.Member, ok, short bool, taken int) {
	skip := map[int32]bool{c.Pid: true}
	if cg := claimCgroup(c); cg != "" {
		pids, err := actions.CgroupProcs(cg)
		switch {
		case err == nil && len(pids) > 0:
			ok = true // the teardown's cgroup finder binds them
		case err != nil && pidfd.Short(err):
			short = true
		}
	}
	// Each handle kept is charged to b (the claim's user's share of the
	// descriptors teardowns hold), as the members a teardown's finders
	// bind are: a survivors claim is one a user reaches at will (members
	// over that share), and its members bound whole held seven times the
	// share for the user's grace. What b refuses is over, not bound.
	bind := func(pid int32, tok token.Token) {
		if b != nil && !b.Take() {
			over = append(over, actions.OverBudget(pid, tok))
			return
		}
		v, h := d.judge.Bind(pid, tok)
		if h == nil {
			if b != nil {
				b.Give(1)
			}
			short = short || v.Transient
			return
		}
		skip[pid] = true
		proven = append(proven, h)
		taken++
	}
	if c.State == store.Survivors && c.Release != nil {
		for _, s := range c.Release.Survivors {
			if !skip[s.Pid] {
				bind(s.Pid, s.Token)
			}
		}
	}
	// A teardown decided before the daemon stopped (the claim is
	// releasing: its release was asked, or its holder, wall clock or
	// caller ended it, while the root was OWNED), or one that left
	// members alive or unbound (survivors), resumes on the members
	// recorded: each was born in the claim's tree and binds only as that
	// very instance. Only reported, they lived on where no cgroup holds
	// them, and the job ended with its TERM-ignoring child running.
	resumed := c.State == store.Releasing || c.State == store.Survivors
	recorded, left, rshort := d.recordedMembersWithin(c, skip, b)
	short = short || rshort
	for _, h := range recorded {
		skip[h.Pid()] = true
		if resumed {
			proven = append(proven, h)
			taken++
			continue
		}
		unproven = append(unproven, actions.Member{Pid: h.Pid(), Token: h.Token(),
			Reason: "recorded member alive under a gone root: reported, not signalled"})
		h.Close()
		if b != nil {
			b.Give(1)
		}
	}
	for _, m := range left {
		if resumed {
			over = append(over, actions.OverBudget(m.Pid, m.Token))
		} else {
			unproven = append(unproven, actions.Member{Pid: m.Pid, Token: m.Token,
				Reason: "recorded member under a gone root, not looked at: the teardowns of this user hold all the descriptors they may; not signalled"})
		}
	}
	// Descendants the graph saw born but the member writer has not
	// recorded (the root exited at once, or the user's quota dropped the
	// records) are reported the same way, or, for a teardown that
	// resumes, bound as the recorded ones are, within b: each binds only
	// as the instance whose birth the graph saw (a review's members over
	// the share, never recorded, were lost at the next pass and lived on).
	if nodes, err := d.tr.Load().Graph().Descendants(c.Pid, c.Token); err == nil {
		for _, n := range nodes {
			if !n.Live() || skip[n.Pid] {
				continue
			}
			if !resumed {
				unproven = append(unproven, actions.Member{Pid: n.Pid, Token: n.Token,
					Reason: "born under a root now gone: reported, not signalled"})
				continue
			}
			bind(n.Pid, n.Token)
		}
	}
	return proven, unproven, over, ok || len(proven) > 0 || len(over) > 0, short, taken
}

// teardown tears down a claim's proven members: the OWNED root (nil when
// it is gone) with the members the tracker's lineage finds, the grant's
// cgroup, and extra members the caller bound. It runs in the claim's
// worker, which holds the claim's lock; the caller keeps root and extra.
// The outcome decides the claim's state (table.go afterTeardown), unless
// the daemon is stopping (ctx ended): then nothing more is sent and the
// claim stays releasing, its grace deadline stored, for the next start.
func (d *Daemon) teardown(ctx context.Context, c *store.Claim, v verdict.Verdict, root *pidfd.Handle, extra []*pidfd.Handle, rq request, grace time.Duration) (actions.Outcome, error) {
	principal := c.UID
	if rq.principal != nil {
		principal = *rq.principal
	}
	// The descriptors count against the claim's share when it acts for
	// the claim's own uid, else against the principal's (root: none).
	share := principal
	if principal == c.UID {
		share = claimShare(c)
	}
	over := slices.Clip(rq.over)
	short := false
	if root != nil {
		// The recorded members bound here are this call's to close (the
		// caller's extra stay the caller's): one descriptor each, held
		// for the grace, never past the teardown, and within the
		// principal's share (memberFDs).
		b := d.fds.forUID(share)
		var recorded []*pidfd.Handle
		var left []store.Member
		recorded, left, short = d.recordedMembersWithin(c, map[int32]bool{root.Pid(): true}, b)
		defer func() {
			for _, h := range recorded {
				h.Close()
			}
			if b != nil && len(recorded) > 0 {
				b.Give(len(recorded))
			}
		}()
		extra = append(slices.Clip(extra), recorded...)
		for _, m := range left {
			over = append(over, actions.Member{Pid: m.Pid, Token: m.Token,
				Reason: "recorded member not bound: the teardowns of this user hold all the descriptors they may; not signalled"})
		}
	}
	td := d.newTeardown(grace, principal, share, claimCgroup(c), c.ID, rq.say, rq.graceEnd)
	out := td.RunBound(ctx, v, root, extra)
	if out.Acted && len(over) > 0 {
		// The finders may have found and reported them too.
		said := make(map[int32]bool, len(out.Unproven))
		for _, u := range out.Unproven {
			said[u.Pid] = true
		}
		for _, m := range over {
			if !said[m.Pid] {
				out.Unproven = append(out.Unproven, m)
			}
		}
	}
	// Processes the teardown did not signal may live on in the claim's
	// own cgroup: an init of a pid namespace refused for a process
	// entered into it, members over the descriptor budget, a child forked
	// after the last look. Every process there is the claim's, so the
	// claim is not over while one its principal may signal is: it stays
	// open (counted in its user's quotas, retried by the reaper, watched
	// until the cgroup empties), where before it closed and they ran on
	// unmanaged. One the principal may not signal (a setuid program's,
	// reported) does not hold it: its user could never end the claim.
	cg := claimCgroup(c)
	held := out.Acted && cg != "" && heldAfter(cg, principal)
	// Members left unbound for a want of descriptors (the principal's
	// share spent, or the daemon's) live on unsignalled: the claim stays
	// open for the next pass to bind them, where before it closed as dead
	// with them running (a review's other user held the descriptors).
	partial := out.Acted && (out.Partial || short || len(over) > 0)
	// The outcome, its feed line and the caller's answer say what the
	// record says: not dead while the claim stays open for them.
	out.Dead = out.Dead && !held && !partial
	out.Partial = partial
	d.log.TeardownFor(c.ID, out)
	if ctx.Err() != nil {
		return out, nil // the worker's defer drops the tearing mark
	}
	rel := &store.Release{Dead: out.Dead, Escalated: out.Escalated, Ownership: out.Verdict.Result, At: d.now(), Cause: rq.cause,
		Incomplete: api.Trunc(out.Incomplete, 1000)}
	rel.Survivors, rel.SurvivorsTotal = instances(out.Survivors)
	rel.Unproven, rel.UnprovenTotal = instances(out.Unproven)
	state := afterTeardown(c.Kind, !rel.Dead)
	if !out.Acted {
		// Refused (a protected root): nothing was signalled; the claim
		// closes with the reason.
		state = store.Released
		if c.Kind == store.Job {
			state = store.Retired
		}
	}
	was := c.State
	err := d.update(c, func(x *store.Claim) {
		x.Release, x.GraceUntil, x.Grace = rel, time.Time{}, 0
		if x.State != store.Releasing {
			return // moved on meanwhile (a job's exit was recorded)
		}
		x.State = state
		x.LastVerdict = storeVerdict(v, rel.At)
		switch {
		case state == store.Retired:
			x.RetiredReason = api.Trunc("not signalled: "+out.Error, 2000)
		case state == store.Releasing && x.Kind == store.Job && !x.EndedAt.IsZero():
			// Its root exited during the grace (or before a restart
			// resumed it), and nothing proven is left: it is over.
			x.State = store.Exited
			x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: "exited", Mechanism: string(d.tr.Load().Mechanism()), At: rel.At}
		}
	})
	// A job's root that exits from here on ends the claim itself (or,
	// left in survivors, the next pass does); one that exited during the
	// grace had its exit recorded, and the write above ended the claim.
	// Dropped only now: dropped before the write, a root's exit between
	// the two ended as exited a job this write would have left open.
	d.tearing.Delete(c.ID)
	if err == nil && Open(was) && c.State == store.Exited {
		d.mu.Lock()
		delete(d.unwritten, c.ID) // its status is written
		d.mu.Unlock()
		d.jobExited(c)
	}
	if err == nil && held && c.State == store.Survivors {
		d.watchLeftovers(c.ID, cg)
	}
	if err == nil && rel.Dead && c.Cgroup != "" && !Open(c.State) {
		removeCgroup(cg)
	}
	return out, err
}

// shortenGrace records that claim id's teardown in progress was asked a
// grace ending grace from now, earlier than its own: a restart resumes
// what remains of that one. A claim no longer releasing is left as it is.
func (d *Daemon) shortenGrace(id string, grace time.Duration) {
	end := d.now().Add(grace)
	c := store.Claim{ID: id}
	_ = d.update(&c, func(x *store.Claim) { // a failure is counted and logged by update
		if x.State == store.Releasing && (x.GraceUntil.IsZero() || end.Before(x.GraceUntil)) {
			x.GraceUntil = end
		}
	})
}

// graceFor is a teardown's grace: the request's, else what remains of one
// a stopped daemon left in progress, else the configured one.
func (d *Daemon) graceFor(c *store.Claim, rq request) time.Duration {
	switch {
	case rq.grace > 0:
		return rq.grace
	case c.State == store.Releasing && !c.GraceUntil.IsZero():
		// What remains, by the wall clock, of the grace a stopped
		// daemon began: never more than that whole grace (a record
		// without it: the longest a request may ask), so a clock
		// stepped back meanwhile does not stretch it by the step.
		whole := c.Grace
		if whole <= 0 {
			whole = max(api.MaxGrace, time.Duration(d.cfg.Grace))
		}
		return min(max(c.GraceUntil.Sub(d.now()), time.Millisecond), whole)
	}
	return time.Duration(d.cfg.Grace)
}

// newTeardown is the one place a daemon teardown is made: every signal it
// sends or is refused is one signal_sent line in the feed.
// Its signals are sent with principal's rights; the descriptors it binds
// count against share's (fdBudget).
func (d *Daemon) newTeardown(grace time.Duration, principal, share uint32, cgroup, claimID string, say func(string), end *actions.GraceEnd) *actions.Teardown {
	if grace <= 0 {
		grace = time.Duration(d.cfg.Grace)
	}
	return actions.New(d.judge, d.tr.Load().Finder(d.judge), actions.Options{
		Grace:      grace,
		Principal:  &principal,
		Budget:     d.fds.forUID(share),
		Cgroup:     cgroup,
		OnProgress: say,
		GraceEnd:   end,
		Exits:      d.exits,
		OnSignal: func(m actions.Member, sig unix.Signal, err error) {
			d.log.Signal(logfeed.Signal{Pid: m.Pid, Token: m.Token, Signal: unix.SignalName(sig), Mechanism: "pidfd", Err: err, ClaimID: claimID})
		},
	})
}

func storeVerdict(v verdict.Verdict, at time.Time) *store.Verdict {
	return &store.Verdict{Result: v.Result, Reason: api.Trunc(v.Reason, 2000), Mechanism: v.Mechanism, At: at}
}

// instanceBytes bounds what one list of a release record (survivors, or
// unproven) takes in the claim's record, which the store caps at 64 KiB
// with the argv's 32 KiB in it: a user's tree of a thousand processes left
// unproven made a record the store refused at every pass, so the claim
// never closed and every pass counted a store error.
const instanceBytes = 8 << 10

// instances is ms as a release record keeps them: as many as fit in
// instanceBytes, the last one kept saying how many more were left out
// (the teardown's log line names them all); total is len(ms) when some
// were left out, else 0 (store.Release's totals).
func instances(ms []actions.Member) (kept []store.Instance, total int) {
	var out []store.Instance
	size := 0
	for i, m := range ms {
		in := store.Instance{Pid: m.Pid, Token: m.Token, Reason: api.Trunc(m.Reason, 500)}
		size += len(in.Token.String()) + len(in.Reason) + 64
		if size > instanceBytes && len(out) > 0 {
			last := &out[len(out)-1]
			last.Reason = api.Trunc(last.Reason, 400) + fmt.Sprintf(" (and %d more processes not recorded here)", len(ms)-i)
			return out, len(ms)
		}
		out = append(out, in)
	}
	return out, 0
}

// write records a state and a verdict (and a release, when not nil).
func (d *Daemon) write(c *store.Claim, s store.State, v verdict.Verdict, rel *store.Release) error {
	now := d.now()
	return d.update(c, func(x *store.Claim) {
		x.State = s
		x.LastVerdict = storeVerdict(v, now)
		if rel != nil {
			x.Release = rel
		}
	})
}

// update is the one way the executor changes a stored claim: the store is
// written first, and only a write that landed changes c and the in-memory
// index, so the two never disagree. A failed write is logged, counted
// (status store_errors) and returned.
func (d *Daemon) update(c *store.Claim, f func(x *store.Claim)) error {
	var fresh store.Claim
	var prev store.State
	err := d.st.Update(c.ID, func(x *store.Claim) error {
		prev = x.State
		f(x)
		fresh = *x
		return nil
	})
	if err != nil {
		d.storeFailed("update claim "+c.ID, err)
		return fmt.Errorf("claim %s not updated: %w", c.ID, storeErr(err))
	}
	*c = fresh
	if c.State != prev {
		ev := claimEvent(logfeed.ActionClaimState, c)
		ev.From, ev.State = string(prev), string(c.State)
		if c.LastVerdict != nil {
			ev.Reason = c.LastVerdict.Reason
		}
		d.log.Claim(ev)
	}
	d.claims.set(c)
	if Open(c.State) {
		d.index(c)
	} else {
		d.unindex(c)
	}
	if Open(prev) && !Open(c.State) && c.Cgroup != "" {
		// A claim closed its own way (dropped, retired, released with
		// processes reported): its cgroup goes too once empty, or every
		// such claim left an empty directory in the daemon's tree (a
		// test run left one a run, for the life of the host's tree).
		go removeCgroup(claimCgroup(c))
	}
	return nil
}

// storeFailed logs and counts a store error.
func (d *Daemon) storeFailed(what string, err error) {
	d.storeErrors.Add(1)
	msg := what + ": " + err.Error()
	d.lastStoreErr.Store(&msg)
	d.log.Error(what, err)
}

// readopt admits an OWNED claim's root and its members to the graph again
// after a restart: members from the grant's cgroup where it has one, else
// the members recorded as they were born, each bound and verified by its
// token. It returns how many members were found.
func (d *Daemon) readopt(c *store.Claim, root *pidfd.Handle) int {
	d.admit(c.ID, c.Pid, root.Token())
	skip := map[int32]bool{root.Pid(): true}
	var hs []*pidfd.Handle
	if cg := claimCgroup(c); cg != "" {
		hs = bindCgroup(cg, d.boot, skip)
	} else {
		hs, _ = d.recordedMembers(c, skip)
	}
	for _, h := range hs {
		d.admit(c.ID, h.Pid(), h.Token())
		h.Close()
	}
	return len(hs)
}

// recordedMembers binds the recorded members of a claim that verify now.
// Members that no longer verify are forgotten.
func (d *Daemon) recordedMembers(c *store.Claim, skip map[int32]bool) (out []*pidfd.Handle, short bool) {
	out, _, short = d.recordedMembersWithin(c, skip, nil)
	return out, short
}

// recordedMembersWithin is recordedMembers binding each within b, when
// set (one of it per bound member, kept until the caller gives them
// back); the members it had no budget left to try are returned in left.
func (d *Daemon) recordedMembersWithin(c *store.Claim, skip map[int32]bool, b actions.Budget) (out []*pidfd.Handle, left []store.Member, short bool) {
	var stale []store.Instance
	for i, m := range c.Members {
		if skip[m.Pid] {
			continue
		}
		if b != nil && !b.Take() {
			for _, m := range c.Members[i:] {
				if !skip[m.Pid] {
					left = append(left, m)
				}
			}
			break
		}
		v, h := d.judge.Bind(m.Pid, m.Token)
		if h == nil {
			if b != nil {
				b.Give(1)
			}
			short = short || v.Transient
			if v.Result == verdict.Gone || v.Result == verdict.Foreign {
				stale = append(stale, store.Instance{Pid: m.Pid, Token: m.Token})
			}
			continue
		}
		skip[m.Pid] = true
		out = append(out, h)
	}
	if len(stale) > 0 {
		if _, err := d.st.RemoveMember(c.ID, stale...); err != nil && !errors.Is(err, store.ErrNotFound) {
			d.storeFailed("forget members of "+c.ID, err)
		}
	}
	return out, left, short
}

// finishJob records a job's end. Caller holds the claim lock. known says
// whether ws is the kernel's status; when it is not, and none was recorded
// before, the claim says the exit code is unknown.
func (d *Daemon) finishJob(c *store.Claim, ws syscall.WaitStatus, known bool) error {
	// A status whose write failed is kept for the next try (the pass
	// finishes the job without one): one failed write lost a job's exit
	// code to "exited while not watched".
	d.mu.Lock()
	if kept, ok := d.unwritten[c.ID]; ok && !known {
		ws, known = kept, true
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if known && Open(c.State) {
			d.unwritten[c.ID] = ws
		} else {
			delete(d.unwritten, c.ID)
		}
		d.mu.Unlock()
	}()
	now := d.now()
	was := c.State
	// Processes the root left in the job's own cgroup keep the job open
	// (leftovers_linux.go).
	cg := claimCgroup(c)
	left := cg != "" && cgroupPopulated(cg)
	defer func() {
		if left && (c.State == store.Running || c.State == store.Survivors) {
			d.watchLeftovers(c.ID, cg)
		}
		if Open(was) && c.State == store.Exited {
			d.jobExited(c)
			// Its cgroup, once its last process has left it (a job's
			// cgroup stayed behind, one empty directory per job, for
			// the life of the host's cgroup tree).
			go removeCgroup(claimCgroup(c))
		}
	}()
	return d.update(c, func(x *store.Claim) {
		if !Open(x.State) {
			return
		}
		switch {
		case known && ws.Exited():
			code := ws.ExitStatus()
			x.ExitCode = &code
		case known && ws.Signaled():
			x.ExitSignal = int(ws.Signal())
		case x.ExitCode == nil && x.ExitSignal == 0 && x.RetiredReason == "":
			x.RetiredReason = "exited while not watched; exit code unknown"
		}
		if left && x.State == store.Running {
			x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: "exited; processes it left run on in its cgroup",
				Mechanism: string(d.tr.Load().Mechanism()), At: now}
			return
		}
		if x.EndedAt.IsZero() {
			x.EndedAt = now
		}
		if x.State == store.Survivors || left && x.State == store.Releasing && signallableIn(cg, x.UID) {
			// A teardown left members alive or unbound, or processes in
			// its cgroup: the job stays open, its root's end recorded,
			// and the next pass decides (with no cgroup too: a review's
			// job, its members over its user's share, ended as exited
			// with 21 of them running).
			return
		}
		if _, ok := d.tearing.Load(x.ID); ok && known && x.State == store.Releasing {
			// A teardown runs: the root's exit is recorded, and the
			// claim stays releasing until the grace has dealt with
			// what the root left (its members ignoring SIGTERM). Ended
			// here, a restart during the grace found the job over and
			// left them running, unwatched. (A status this does not
			// know comes from a pass that holds the claim's lock, so
			// no teardown of it runs: that always ends the claim.)
			return
		}
		x.State = store.Exited
		x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: "exited", Mechanism: string(d.tr.Load().Mechanism()), At: now}
	})
}

// jobExited writes the job_exited line of a job whose claim has just
// ended.
func (d *Daemon) jobExited(c *store.Claim) {
	ev := claimEvent(logfeed.ActionJobExited, c)
	ev.ExitCode, ev.Signal, ev.Reason = c.ExitCode, c.ExitSignal, c.RetiredReason
	d.log.Claim(ev)
}

// wallClock settles the claims past their deadline.
func (d *Daemon) wallClock(ctx context.Context) {
	now := d.now()
	var due []string
	d.mu.Lock()
	for id, t := range d.deadline {
		if now.After(t) {
			due = append(due, id)
			delete(d.deadline, id)
		}
	}
	d.mu.Unlock()
	sort.Strings(due)
	for _, id := range due {
		d.settle(ctx, id, request{trigger: WallClock, async: true})
	}
}

// retain deletes finished claims past the retention bounds, then makes
// room in the store for users' new claims when they have filled their
// share of it (pruneForRoom).
func (d *Daemon) retain() {
	cs, err := d.st.List(store.Filter{})
	if err != nil {
		d.storeFailed("list claims", err)
		return
	}
	now := d.now()
	var done []store.Claim
	for _, c := range cs {
		if Open(c.State) {
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
	d.capFinal(done)
	d.pruneForRoom()
}

// pruneForRoom drops finished claims of users other than root while the
// store is past the share their new claims may fill (storeShareOf4, which
// then refuses their launches), until it is back under eleven sixteenths:
// the user whose claims store the most bytes loses its oldest finished
// claim first, results owed to a job's caller after all others. Without
// it a dozen users at their byte quotas, with claims finished long before
// they aged out, kept every other user's launches refused for days.
// Root's claims, and every open claim, stay.
func (d *Daemon) pruneForRoom() {
	over := func() bool {
		used, limit, err := d.st.Usage()
		return err == nil && used*4 >= limit*storeShareOf4
	}
	if !over() {
		return
	}
	cs, err := d.st.List(store.Filter{})
	if err != nil {
		d.storeFailed("list claims", err)
		return
	}
	bytes := map[uint32]int64{}
	cands := map[uint32][]store.Claim{}
	for _, c := range cs {
		share := claimShare(&c)
		if share == 0 {
			continue
		}
		bytes[share] += claimBytes(&c)
		if !Open(c.State) {
			cands[share] = append(cands[share], c)
		}
	}
	for _, list := range cands {
		owed := func(c *store.Claim) bool { return c.Kind == store.Job && !c.FollowedUp }
		sort.SliceStable(list, func(i, j int) bool {
			if oi, oj := owed(&list[i]), owed(&list[j]); oi != oj {
				return oj
			}
			return list[i].UpdatedAt.Before(list[j].UpdatedAt)
		})
	}
	under := func() bool {
		used, limit, err := d.st.Usage()
		return err != nil || used*16 < limit*11
	}
	for !under() {
		var most uint32
		for uid, list := range cands {
			if len(list) > 0 && (most == 0 || bytes[uid] > bytes[most] || bytes[uid] == bytes[most] && uid < most) {
				most = uid
			}
		}
		if most == 0 {
			return // nothing left that may go
		}
		c := cands[most][0]
		cands[most] = cands[most][1:]
		bytes[most] -= claimBytes(&c)
		d.drop(c)
		ev := claimEvent(logfeed.ActionClaimPruned, &c)
		ev.State, ev.Reason = string(c.State), fmt.Sprintf("the claims store was past the %d%% its users' claims may fill: "+
			"the oldest finished claim of uid %d, whose claims store the most, was deleted", 25*storeShareOf4, most)
		d.log.Claim(ev)
	}
}

// capFinal keeps at most MaxFinal finished claims (done).
func (d *Daemon) capFinal(done []store.Claim) {
	if d.cfg.MaxFinal <= 0 || len(done) <= d.cfg.MaxFinal {
		return
	}
	// Over the cap, the uid with the most finished claims loses its
	// oldest first: one user's churn of short launches must not push
	// another user's job results (owed to their caller) out of the
	// store. Before, the oldest of all went, whoever's they were.
	byUID := map[uint32][]store.Claim{}
	for _, c := range done {
		share := claimShare(&c)
		byUID[share] = append(byUID[share], c)
	}
	for _, cs := range byUID {
		sort.Slice(cs, func(i, j int) bool { return cs[i].UpdatedAt.Before(cs[j].UpdatedAt) })
	}
	for over := len(done) - d.cfg.MaxFinal; over > 0; over-- {
		var most uint32
		for uid, cs := range byUID {
			if n := len(byUID[most]); len(cs) > n || (len(cs) == n && uid < most) {
				most = uid
			}
		}
		d.drop(byUID[most][0])
		byUID[most] = byUID[most][1:]
	}
}

func (d *Daemon) drop(c store.Claim) {
	if err := d.st.Delete(c.ID); errors.Is(err, store.ErrNotFound) {
		// Dropped meanwhile by another (two launches of one user
		// pruning its oldest failed claim at once): no store fault.
		d.claims.del(c.ID)
		return
	} else if err != nil {
		d.storeFailed("delete claim "+c.ID, err)
		return
	}
	d.claims.del(c.ID)
	if d.ownOutput(&c) {
		// Taken back from its user, emptied, then unlinked: a hard
		// link its job made elsewhere is left naming an empty file of
		// root's that no user may open. Before, it stayed writable by
		// its user, root's and outside every bound.
		d.discardOutput(c.ID, c.OutputPath)
	}
	d.locks.Delete(c.ID)
}

// sameInstance reports whether a stored token names tok's instance.
func sameInstance(stored, tok token.Token) bool {
	m, _ := token.Compare(stored, tok)
	return m == token.Same
}

// claimEvent is the log feed's view of a claim, for its lines.
func claimEvent(action string, c *store.Claim) logfeed.ClaimEvent {
	return logfeed.ClaimEvent{Action: action, ClaimID: c.ID, Owner: c.Owner, Kind: string(c.Kind), UID: c.UID, Pid: c.Pid, Token: c.Token}
}
