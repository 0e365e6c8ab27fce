package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// This file is the API's backend: each method authorises the peer, then
// asks the executor (reconcile_linux.go) or reads the store and graph.

// ServiceUnit is the systemd unit of the packaged daemon, named in the
// refusal of a kill of the daemon or its ancestors.
const ServiceUnit = "procsupervisor"

// DefaultKillsPerUID is how many kills of members one uid but root may
// have in progress at once. Each holds descriptors and a goroutine of the
// daemon's for up to api.MaxGrace after its request has gone; 64 is
// more than a person kills by hand at once.
const DefaultKillsPerUID = 64

func may(p api.Peer, c *store.Claim) bool { return p.Root() || c.UID == p.UID }

// serves refuses every caller of another uid when the daemon is not root:
// it could only act for them with its own rights, and what it started
// would run as its own user.
func (d *Daemon) serves(p api.Peer) error {
	if euid := uint32(os.Geteuid()); euid != 0 && p.UID != euid {
		return forbidden("this daemon runs as uid %d and acts for uid %d only (run it as root to serve other users)", euid, euid)
	}
	return nil
}

// servesNow is serves, for a request that reads the graph: once it
// returns nil, every fork, exec and exit that returned to its process
// before the request came is in the graph (tracker.Sync), or the request
// fails as unavailable after catchUpWait. A caller that leaves does not
// cut the wait short: what it asked goes on without it (a teardown runs
// to its end).
func (d *Daemon) servesNow(ctx context.Context, p api.Peer) error {
	if err := d.serves(p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catchUpWait)
	defer cancel()
	if err := d.tr.Load().Sync(ctx); err != nil {
		return fmt.Errorf("the process graph cannot be brought up to date: %w: %w", err, api.ErrUnavailable)
	}
	return nil
}

// catchUpWait bounds how long a request waits for the graph to catch up
// with the kernel's events.
const catchUpWait = 5 * time.Second

func grace(r *api.Duration) time.Duration {
	if r == nil {
		return 0 // the configured grace
	}
	return time.Duration(*r)
}

// Release implements api.Backend.
func (d *Daemon) Release(ctx context.Context, p api.Peer, id string, r *api.ReleaseRequest) (res api.ReleaseResponse, err error) {
	defer func() {
		d.log.Request(logfeed.Request{Action: logfeed.ActionReleaseRequested, UID: p.UID, GID: p.GID, Pid: p.Pid,
			ClaimID: id, Owner: res.Claim.Owner, Kind: string(res.Claim.Kind), Target: res.Claim.Pid, TargetTok: res.Claim.Token, Err: err})
	}()
	if err := d.servesNow(ctx, p); err != nil {
		return api.ReleaseResponse{}, err
	}
	c, err := d.st.Get(id)
	if err != nil {
		return api.ReleaseResponse{}, claimErr(id, err)
	}
	if !may(p, &c) {
		// As show, wait and output answer: the same as a claim that
		// does not exist, so no answer tells another user's claim ids.
		return api.ReleaseResponse{}, fmt.Errorf("claim %s: %w", id, api.ErrNotFound)
	}
	if err := d.protectedRoot(c.Pid, c.Token); err != nil {
		return api.ReleaseResponse{}, err
	}
	_, out, err := d.settle(ctx, id, request{trigger: ReleaseAsked, grace: grace(r.Grace)})
	if err != nil {
		return api.ReleaseResponse{}, err
	}
	c, err = d.st.Get(id)
	if err != nil {
		return api.ReleaseResponse{}, storeErr(err)
	}
	return api.ReleaseResponse{Claim: d.view(c), Outcome: out}, nil
}

// view is a stored claim as the API shows it. Its argv goes through the
// patterns again: a claim stored before one of them (or before the
// startup rewrite could store it redacted) never shows what they hide.
func (d *Daemon) view(c store.Claim) api.Claim {
	redactClaim(d.redact, &c, false)
	return api.ClaimOf(c)
}

// List implements api.Backend: a page from the in-memory index, so its
// cost follows the page, not the number of claims.
func (d *Daemon) List(ctx context.Context, p api.Peer, q api.ListQuery) ([]api.Claim, string, error) {
	if err := d.serves(p); err != nil {
		return nil, "", err
	}
	var only *uint32
	if !p.Root() {
		only = &p.UID
	}
	ids, next := d.claims.page(q, only)
	out := make([]api.Claim, 0, len(ids))
	for _, id := range ids {
		c, err := d.st.Get(id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			d.storeFailed("read claim "+id, err)
			return nil, "", err
		}
		out = append(out, d.view(c))
	}
	return out, next, nil
}

// Get implements api.Backend. A job's result picked up by its caller (the
// uid that launched it: the claim's) is no longer owed; root reading a
// user's job (an operator's `show`) leaves it owed to the user.
func (d *Daemon) Get(ctx context.Context, p api.Peer, id string) (api.Claim, error) {
	if err := d.serves(p); err != nil {
		return api.Claim{}, err
	}
	c, err := d.st.Get(id)
	if err != nil {
		return api.Claim{}, claimErr(id, err)
	}
	if !may(p, &c) {
		return api.Claim{}, fmt.Errorf("claim %s: %w", id, api.ErrNotFound)
	}
	if c.Kind == store.Job && (c.State == store.Exited || c.State == store.Retired) && !c.FollowedUp && p.UID == c.UID {
		if err := d.st.Update(id, func(x *store.Claim) error { x.FollowedUp = true; return nil }); err != nil {
			d.storeFailed("mark "+id+" followed up", err)
			return api.Claim{}, storeErr(err)
		}
		c.FollowedUp = true
	}
	return d.view(c), nil
}

// Reap implements api.Backend. Only root runs the reaper (it acts on every
// claim); a dry run is open to all and judges only the caller's claims.
func (d *Daemon) Reap(ctx context.Context, p api.Peer, r *api.ReapRequest) (rep api.Report, err error) {
	if !r.DryRun {
		defer func() {
			d.log.Request(logfeed.Request{Action: logfeed.ActionReapRequested, UID: p.UID, GID: p.GID, Pid: p.Pid, Err: err})
		}()
	}
	if err := d.servesNow(ctx, p); err != nil {
		return api.Report{}, err
	}
	if !p.Root() && !r.DryRun {
		return api.Report{}, forbidden("only root runs the reaper")
	}
	d.waitChildren()
	rq := request{trigger: Pass, dryRun: r.DryRun, passOver: true}
	if !p.Root() {
		// Only the caller's claims are judged: a dry run of every claim
		// for any user cost the daemon 23 ms of CPU per request with 300
		// claims of root's, at 100 requests a second, and its counts
		// told the user of every other user's claims.
		rq.uid = &p.UID
	}
	return d.reconcileAll(ctx, rq), nil
}

// Status implements api.Backend.
func (d *Daemon) Status(ctx context.Context, p api.Peer) (api.Status, error) {
	if err := d.serves(p); err != nil {
		return api.Status{}, err
	}
	tr := d.tr.Load()
	st := api.Status{
		Version: d.cfg.Version, Pid: os.Getpid(), Mechanism: string(tr.Mechanism()),
		Tried: tr.Tried(), StartedAt: d.started, UptimeSeconds: time.Since(d.started).Seconds(),
		Cgroup: d.cg.dir, CgroupReason: d.cg.reason,
		MembersLost: d.membersDropped.Load(), StoreErrors: d.storeErrors.Load(),
	}
	if ps, ok := tr.Polls(); ok {
		st.PollFailures, st.LastPollError = ps.Failures, ps.LastError
	}
	// How many members all claims recorded and how many holders they
	// have tell of other users' claims: root's to see. (Members dropped,
	// like store errors, is the daemon's health.)
	if p.Root() {
		st.MembersQueued = d.membersRecorded.Load()
		if d.hw != nil {
			st.HoldersWatched, st.HoldersUnwatched = d.hw.stats()
		}
	}
	// The count is the daemon's health, anyone's to see; the text names
	// other users' claims, and is root's.
	if e := d.lastStoreErr.Load(); e != nil && p.Root() {
		st.LastStoreError = *e
	}
	es := tr.Stats()
	st.Events, st.LostEvents, st.Resyncs = es.Events, es.Lost, tr.Resyncs()
	st.GraphLive = tr.Graph().Stats().Live
	if p.Root() {
		ss, err := d.st.Stats()
		if err != nil {
			d.storeFailed("store stats", err)
			return st, err
		}
		st.Counts, st.Claims, st.Members, st.StoreBytes = ss.Counts, ss.Claims, ss.Members, ss.FileBytes
	} else {
		// Another user's claims are none of the caller's business, even
		// counted: those that count against its quotas (its own, and its
		// subordinate uids'), from the index without reading the store.
		st.Counts, st.Claims, st.Members, st.StoreBytes = d.claims.countsOf(p.Share())
	}
	ls := d.log.Stats()
	st.LogDropped, st.LastLogError, st.LogWithheld = ls.Dropped, ls.LastSinkError, ls.ArgsWithheld
	d.repMu.Lock()
	if p.Root() {
		st.Reconcile = d.reconcile
	} else if r := d.reconcileOf[p.Share()]; r != nil {
		// Its own claims' items and counts, as for its counts above.
		st.Reconcile = *r
	}
	d.repMu.Unlock()
	return st, nil
}

// Verify implements api.Backend: anyone may ask; a verdict signals
// nothing. Where /proc hides other users' processes, the token observed
// at the pid (its start time) is given only to the process's own user.
func (d *Daemon) Verify(ctx context.Context, p api.Peer, r *api.ClaimRequest) (verdict.Verdict, error) {
	if err := d.servesNow(ctx, p); err != nil {
		return verdict.Verdict{}, err
	}
	// The owner is read before the judgement and again after it: a
	// process that /proc hides from the caller, or that went between the
	// reads, gets no verdict but GONE.
	hides := d.procHiddenFrom(ctx, p)
	hidden, ok := ownerHidden(hides, p, r.Pid)
	var v verdict.Verdict
	if !hidden {
		v = d.judge.Judge(r.Pid, r.Token)
		hidden, ok = ownerHidden(hides, p, r.Pid)
	}
	switch {
	case hidden, !ok && v.Result != verdict.Gone:
		// The verdict on a token the caller chose would tell it the start
		// time /proc hides from it: one tick at a time, 2,704 requests
		// found another user's in 25 s. Whether the pid is in use is no
		// secret (kill(2) tells anyone); the rest is.
		mech := v.Mechanism
		if tr := d.tr.Load(); mech == "" && tr != nil {
			mech = string(tr.Mechanism())
		}
		return verdict.Verdict{Result: verdict.Unverifiable, Mechanism: mech,
			Reason: fmt.Sprintf("pid %d is hidden from you by /proc (not wholly your process), or went while it was judged", r.Pid)}, nil
	case !ok:
		// GONE: whether the named instance's exit was observed would
		// tell the caller, one tick at a time, the start time of an
		// exited process /proc hid from it.
		v.Observed = token.Token{}
		v.Reason = fmt.Sprintf("no process holds pid %d", r.Pid)
	}
	return v, nil
}

// hiddenFrom reports whether /proc hides pid from p: p is not root, /proc
// is mounted with hidepid, and pid is a live process not wholly p's
// (procWhollyOf). ok is false when /proc hides other users' processes and
// pid's owner could not be read (it has gone): nothing about it may be
// shown then either.
func (d *Daemon) hiddenFrom(ctx context.Context, p api.Peer, pid int32) (hidden, ok bool) {
	return ownerHidden(d.procHiddenFrom(ctx, p), p, pid)
}

// hiddenAtAll reports whether a request about pid must get one answer
// whatever token it names: /proc hides pid from p, or hides other users'
// processes and pid's owner could not be read.
func (d *Daemon) hiddenAtAll(ctx context.Context, p api.Peer, pid int32) bool {
	hidden, ok := d.hiddenFrom(ctx, p, pid)
	return hidden || !ok
}

// errHiddenProcess is the one answer to an admit or a holder naming a
// process hiddenAtAll: a verdict's reason, or a refusal that came only
// for the right token ("belongs to another user" after "start time
// differs" for every other), told a user the start time /proc hides from
// it, one tick a request (748 admits found another user's in 5 s).
func errHiddenProcess(pid int32) error {
	return forbidden("process %d is not yours, or /proc hides it from you: only your own process that verifies now is taken", pid)
}

// ownerHidden is hiddenFrom where whether /proc hides other users'
// processes from p (hides) is known already.
func ownerHidden(hides bool, p api.Peer, pid int32) (hidden, ok bool) {
	if !hides {
		return false, true
	}
	own, err := procWhollyOf(p, pid)
	if err != nil {
		return false, false
	}
	return !own, true
}

// procWhollyOf reports whether process pid is p's as /proc under hidepid
// sees it: its real, effective and saved uids are p's uid and its gids
// p's gid (a setuid or setgid program the user ran is not, nor is one
// that keeps root as its saved uid). Limit: a process the kernel made
// not dumpable with the user's ids (an exec of a file the user may not
// read) is hidden by /proc and counted as the user's here.
func procWhollyOf(p api.Peer, pid int32) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return false, err
	}
	uids, err := procfs.ParseStatusUIDs(b)
	if err != nil {
		return false, err
	}
	gids, err := procfs.ParseStatusGIDs(b)
	if err != nil {
		return false, err
	}
	return uids.All(p.UID) && gids.All(p.GID), nil
}

// Kill implements api.Backend. The daemon signals only an instance it
// holds for the caller: the root of a claim the caller may act on (a
// release of that claim), or a member of one, judged OWNED and bound, and
// torn down with the caller's rights.
func (d *Daemon) Kill(ctx context.Context, p api.Peer, r *api.ClaimRequest) (out actions.Outcome, err error) {
	var held *store.Claim
	defer func() {
		req := logfeed.Request{Action: logfeed.ActionKillRequested, UID: p.UID, GID: p.GID, Pid: p.Pid,
			Target: r.Pid, TargetTok: r.Token, Err: err}
		if held != nil {
			req.ClaimID, req.Owner, req.Kind = held.ID, held.Owner, string(held.Kind)
		}
		d.log.Request(req)
	}()
	if err := d.servesNow(ctx, p); err != nil {
		return actions.Outcome{}, err
	}
	// The index finds a root in memory; a member is the graph's, or, for
	// one it no longer knows, recorded on one of the caller's claims.
	if err := d.protectedRoot(r.Pid, r.Token); err != nil {
		return actions.Outcome{}, err
	}
	tok := r.Token
	roots, mine := d.claims.find(r.Pid, tok, p.UID, p.Root())
	isRoot, others := false, false
	for _, id := range roots {
		if c, err := d.st.Get(id); err == nil && held == nil {
			if may(p, &c) {
				held, isRoot = &c, true
			} else {
				others = true
			}
		}
	}
	if held == nil {
		if root, _, ok := d.tr.Load().Graph().RootOf(r.Pid, tok); ok && slices.Contains(mine, root) {
			if c, err := d.st.Get(root); err == nil {
				held = &c
			}
		} else if ok && d.claims.has(root) {
			others = true
		}
	}
	// Only the claims that record a member at the pid are read: reading
	// every claim of the caller's for a pid it held none of cost 81 ms of
	// CPU a request with 450 claims of 28 KB each.
	for _, id := range d.claims.memberClaims(r.Pid, p.UID, p.Root()) {
		if held != nil {
			break
		}
		c, err := d.st.Get(id)
		if err == nil && slices.ContainsFunc(c.Members, func(m store.Member) bool { return m.Pid == r.Pid && sameInstance(m.Token, tok) }) {
			held = &c
		}
	}
	if held == nil && others {
		if hidden, _ := d.hiddenFrom(ctx, p, r.Pid); hidden {
			// Which answer came would tell whether the token, start
			// time included, is that of a process /proc hides from
			// the caller.
			others = false
		}
	}
	switch {
	case held == nil && others:
		return actions.Outcome{}, fmt.Errorf("%d@%s is held by the supervisor for another user: %w", r.Pid, r.Token, api.ErrNotYours)
	case held == nil:
		return actions.Outcome{}, fmt.Errorf("%d@%s is not held by the supervisor (no claim of its, as root or member): %w", r.Pid, r.Token, api.ErrNotHeld)
	}
	if isRoot {
		_, out, err := d.settle(ctx, held.ID, request{trigger: ReleaseAsked, grace: grace(r.Grace), principal: &p.UID})
		if out == nil {
			out = &actions.Outcome{}
		}
		return *out, err
	}
	v, h := d.judge.Bind(r.Pid, r.Token)
	d.log.VerdictFor(held.ID, v)
	if h == nil {
		return actions.Outcome{Verdict: v}, nil
	}
	// A worker of the daemon's runs it: the grace outlives the client,
	// so a uid but root has DefaultKillsPerUID of them at most (its claim
	// quota bounds the teardowns of roots, not these).
	var asker *uint32
	if !p.Root() {
		share := p.Share()
		asker = &share
	}
	w, started, err := d.work.startFor("kill:"+strconv.Itoa(int(r.Pid))+"@"+r.Token.String(), asker, func(wctx context.Context, say func(string), end *actions.GraceEnd) (api.ReportItem, actions.Outcome, error) {
		defer h.Close()
		out := d.newTeardown(grace(r.Grace), p.UID, p.Share(), "", held.ID, say, end).RunBound(wctx, v, h, nil)
		d.log.TeardownFor(held.ID, out)
		return api.ReportItem{}, out, nil
	})
	if err != nil {
		h.Close()
		return actions.Outcome{Verdict: v}, err
	}
	if !started {
		h.Close() // a kill of this member is already running: wait for it
		w.hurry(grace(r.Grace))
	}
	_, o, err := w.wait(ctx)
	if o == nil {
		return actions.Outcome{Verdict: v}, err
	}
	return *o, err
}

// protectedRoot refuses a kill or a release whose root is (pid, tok) when
// that is still the live instance of pid 1, this daemon or one of its
// ancestors: a teardown would stop the service, or the service manager
// or shell that runs it, and every workload with it.
func (d *Daemon) protectedRoot(pid int32, tok token.Token) error {
	if pid == 0 || !actions.Protected(pid) || d.judge.Judge(pid, tok).Result != verdict.Owned {
		return nil
	}
	if pid == 1 {
		return fmt.Errorf("pid 1 is init and is never signalled through the supervisor: %w", api.ErrProtected)
	}
	what := "an ancestor of the supervisor daemon"
	if int(pid) == os.Getpid() {
		what = "the supervisor daemon itself"
	}
	return fmt.Errorf("pid %d is %s and is never signalled through the supervisor; to stop the service, run `systemctl stop %s`: %w",
		pid, what, ServiceUnit, api.ErrProtected)
}

// Tree implements api.Backend: the process and at most
// api.MaxTreeNodes-1 of its live descendants, in the graph's depth-first
// order (each after its parent), the rest counted in the first node's
// DescendantsCut. The walk of a user's thousands of processes, each with
// a command line of kilobytes, built an answer of 120 MB: sixteen unread
// answers held 2.7 GB of the daemon's memory.
func (d *Daemon) Tree(ctx context.Context, p api.Peer, pid int32, tok token.Token) ([]api.TreeNode, int, error) {
	if err := d.servesNow(ctx, p); err != nil {
		return nil, 0, err
	}
	g := d.tr.Load().Graph()
	ownOnly := d.procHiddenFrom(ctx, p)
	if ownOnly && !tok.IsZero() {
		// A token for a process /proc hides from the caller is not
		// looked at: 404 for every start time but the right one told
		// it that start time (15,481 requests found another user's).
		if hidden, ok := ownerHidden(true, p, pid); hidden || !ok {
			tok = token.Token{}
		}
	}
	if tok.IsZero() {
		n, ok := g.Live(pid)
		if !ok {
			return nil, 1, fmt.Errorf("no live process %d in the graph: %w", pid, api.ErrNotFound)
		}
		tok = n.Token
	}
	w, ok := g.Watch(pid, tok)
	if !ok {
		return nil, 1, fmt.Errorf("%d@%s is not in the graph: %w", pid, tok, api.ErrNotFound)
	}
	nodes, err := g.Descendants(pid, tok)
	if err != nil {
		return nil, 1, fmt.Errorf("%v: %w", err, api.ErrConflict)
	}
	cut := max(0, len(nodes)-(cmp.Or(d.treeNodes, api.MaxTreeNodes)-1))
	nodes = nodes[:len(nodes)-cut]
	walked := 1 + len(nodes)
	out := append([]api.TreeNode{g.TreeNode(w.Node)}, g.TreeNodes(nodes)...)
	if ownOnly {
		out = d.visibleNodes(p, out)
	}
	out[0].DescendantsCut = cut
	d.treeArgs(p, ownOnly, out)
	if !p.Root() {
		// Another user's claim is not named to this one (Get answers
		// it does not exist).
		for i := range out {
			if uid, ok := d.claims.uidOf(out[i].Root); out[i].Root != "" && (!ok || uid != p.UID) {
				out[i].Root = ""
			}
		}
	}
	return out, walked, nil
}
