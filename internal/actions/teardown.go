package actions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Finder finds the descendants of a tree being torn down. Given the members
// bound so far, it returns newly found members as bound handles, having
// proved each belongs to the tree (by observed birth lineage, by the
// grant's own cgroup, or by a parent link read while the parent was a live
// member), and lists what it saw but could not prove. It must not return a
// handle whose pid is already a member.
//
// A finder given a Budget takes one from it before it binds a candidate
// (and gives it back when the candidate is not kept): each handle it
// returns is charged to the budget, so a tree of thousands never holds
// more descriptors than the budget allows, not even for a moment. A
// candidate found once the budget refuses is listed in unproven, not
// bound (OverBudget), and err then wraps ErrBudget. A candidate it could
// not bind for a want of descriptors or memory in this process
// (pidfd.Short) is listed in unproven too, and err then wraps ErrShort.
type Finder interface {
	Find(members []*pidfd.Handle, b Budget) (found []*pidfd.Handle, unproven []Member, err error)
	// Name says how members are found, for the outcome's Mechanism.
	Name() string
}

// blindFinder is a Finder that can tell why the members it finds from a
// tree's first members may not be all of it (observed lineage with a hole
// in it: tracker.Finder).
type blindFinder interface {
	Blind(members []*pidfd.Handle) string
	// BlindAtEnd is Blind asked again at the end of a teardown, of every
	// member it targeted: a hole made during the teardown (events lost
	// while members forked in the grace) is one a member could have left
	// through too. A member that has exited and that the finder no longer
	// holds a record of is no hole then: its exit was seen, or its record
	// kept long enough for what it forked to be found.
	BlindAtEnd(members []*pidfd.Handle) string
}

// Binder judges a claim and binds the judged instance (verdict.Judge).
type Binder interface {
	Bind(pid int32, claim token.Token) (verdict.Verdict, *pidfd.Handle)
}

// Options tune a Teardown. The zero Options are valid.
type Options struct {
	// Grace is how long members get to exit after SIGTERM (DefaultGrace
	// when 0).
	Grace time.Duration
	// KillWait is how long to wait for SIGKILLed members (2s when 0).
	KillWait time.Duration
	// OnSignal is told of every signal sent or refused, exactly once per
	// signal: it is where the audit line is written.
	OnSignal func(m Member, sig unix.Signal, err error)
	// Principal, when set, is the uid the teardown acts for: no process
	// that uid could not signal itself (the kernel's rule: the uid equals
	// the target's real or saved uid) is signalled. Members are checked
	// when found, and every signal is sent with that uid's rights, so the
	// kernel checks again at the signal (signalAs). Nil, or uid 0, means
	// root's claim, or a caller acting with its own rights.
	Principal *uint32
	// Cgroup, when set, is the grant's own cgroup directory (made by the
	// daemon, entered at clone, writable by root only): every process in
	// it is a member.
	Cgroup string
	// OnProgress, when set, is told each step as it starts, in words
	// ("SIGTERM to 3", "waiting up to 8s", "SIGKILL to 1"): a few calls a
	// teardown, for a person watching. It must not block.
	OnProgress func(step string)
	// Protected lists pids never signalled, with their ancestors, whatever
	// proves them members, beyond those every teardown protects (pid 1,
	// this process and its ancestors): the CLI names the running daemon.
	Protected []int32
	// Budget, when set, bounds the descriptors the teardown holds for the
	// members its finders bind (one pidfd each, until it ends): a member
	// found when the budget has none left is reported, not bound and not
	// signalled. The daemon shares one per uid between that uid's
	// teardowns, so one user's tree cannot take the descriptors every
	// user's requests need.
	Budget Budget
	// GraceEnd, when set, may end the grace earlier than Grace: another
	// request that asks a shorter grace of a teardown in progress brings
	// it forward (GraceEnd.Shorten). The wait notices at its next look.
	GraceEnd *GraceEnd
	// Exits, when set, is where the teardown waits for its members to
	// exit (one thread for all teardowns); without it, it polls in a
	// thread of its own.
	Exits *ExitWaiter
}

// GraceEnd is a grace's end that another goroutine may bring forward. Its
// zero value has none; it is safe for concurrent use.
type GraceEnd struct {
	at atomic.Pointer[time.Time]
}

// Shorten makes t the end when there is none yet or t is earlier, and
// reports whether it moved. An end never moves later.
func (g *GraceEnd) Shorten(t time.Time) bool {
	for {
		cur := g.at.Load()
		if cur != nil && !t.Before(*cur) {
			return false
		}
		if g.at.CompareAndSwap(cur, &t) {
			return true
		}
	}
}

// end returns the end, and false when there is none (or g is nil).
func (g *GraceEnd) end() (time.Time, bool) {
	if g == nil {
		return time.Time{}, false
	}
	if p := g.at.Load(); p != nil {
		return *p, true
	}
	return time.Time{}, false
}

// Budget counts descriptors a teardown may hold. Take asks for one; Give
// returns n when the teardown ends. Both must be safe for concurrent use.
type Budget interface {
	Take() bool
	Give(n int)
}

// ErrBudget says a finder found members it did not bind: its Budget had
// none left.
var ErrBudget = errors.New("the descriptor budget is spent")

// ErrShort says a finder saw a candidate it could not bind for a want of
// descriptors or memory in this process (pidfd.Short): reported, neither
// proven nor disproven, and a later look may bind it.
var ErrShort = errors.New("ran short of descriptors or memory to bind a candidate")

// lacking reports whether err is nil or says only that candidates were
// left unbound (ErrBudget, ErrShort), which the unproven members say:
// not a fault of the search.
func lacking(err error) bool {
	if err == nil || err == ErrBudget || err == ErrShort {
		return true
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !lacking(e) {
				return false
			}
		}
		return true
	}
	return false
}

// OverBudget is a candidate a finder found and did not bind because its
// budget refused.
func OverBudget(pid int32, tok token.Token) Member {
	return Member{Pid: pid, Token: tok, Reason: "not bound: the teardowns of this user hold all the descriptors they may; not signalled"}
}

// take asks b for one descriptor; a nil b has no bound.
func take(b Budget) bool { return b == nil || b.Take() }

// give returns n descriptors to b, when there is one.
func give(b Budget, n int) {
	if b != nil && n > 0 {
		b.Give(n)
	}
}

// Teardown tears down a process and its proven descendants. Make one with
// New: every caller, local or daemon, goes through the same rules.
type Teardown struct {
	judge   Binder
	finders []Finder
	opts    Options
	protect protection

	// afterBind runs between the verdict and the first signal (tests).
	afterBind func()
}

// DefaultGrace is the grace period when none is given.
const DefaultGrace = 5 * time.Second

// New returns a Teardown that judges with judge and finds members with
// finder (nil: the root alone, plus the cgroup when Options.Cgroup is set).
func New(judge Binder, finder Finder, o Options) *Teardown {
	t := &Teardown{judge: judge, opts: o, protect: protectedSet(o.Protected)}
	if finder != nil {
		t.finders = append(t.finders, finder)
	}
	if o.Cgroup != "" {
		t.finders = append(t.finders, &CgroupFinder{Dir: o.Cgroup})
	}
	if t.opts.Grace <= 0 {
		t.opts.Grace = DefaultGrace
	}
	if t.opts.KillWait <= 0 {
		t.opts.KillWait = 2 * time.Second
	}
	return t
}

// Run judges the claim (pid, token) and, only if it is OWNED, tears down the
// process and the descendants its finders prove. Anything not OWNED is
// reported and left alone.
func (t *Teardown) Run(ctx context.Context, pid int32, claim token.Token) Outcome {
	v, root := t.judge.Bind(pid, claim)
	if root == nil {
		out := t.newOutcome(v)
		if v.Result == verdict.Gone {
			// Nothing of ours is alive at the pid. A group that outlives its
			// leader cannot be proven ours: report it, never signal it.
			out.Unproven = GroupMembers(pid)
			out.Dead = len(out.Unproven) == 0
		}
		return out
	}
	defer root.Close()
	if t.afterBind != nil {
		t.afterBind()
	}
	return t.RunBound(ctx, v, root, nil)
}

// RunBound tears down an already judged and bound root (verdict v must be
// OWNED), with extra members the caller has bound itself. The handles stay
// owned by the caller. root may be nil when the root is GONE, or FOREIGN
// (its pid reissued: the process there is no member and is not looked
// at), and extra (or the cgroup) holds members proven otherwise.
func (t *Teardown) RunBound(ctx context.Context, v verdict.Verdict, root *pidfd.Handle, extra []*pidfd.Handle) Outcome {
	out := t.newOutcome(v)
	switch {
	case root != nil && v.Result != verdict.Owned:
		out.Error = "refusing to act without an OWNED verdict bound to a handle"
		return out
	case root == nil && (v.Result != verdict.Gone && v.Result != verdict.Foreign || (len(extra) == 0 && t.opts.Cgroup == "")):
		out.Error = "refusing to act without an OWNED verdict bound to a handle"
		return out
	}
	if root != nil {
		// A caller acting with its own rights (the CLI) that may not
		// signal the root is told so, not shown a teardown that failed.
		if err := root.Signal(0); errors.Is(err, unix.EPERM) {
			out.Error = fmt.Sprintf("not permitted to signal pid %d (it belongs to another user): nothing was signalled", root.Pid())
			return out
		}
		if why, ok, _ := t.refuse(root, extra); ok {
			out.Error = fmt.Sprintf("pid %d: %s: nothing was signalled", root.Pid(), why)
			out.Unproven = append(out.Unproven, Member{Pid: root.Pid(), Token: root.Token(), Reason: why})
			return out
		}
	}
	t.run(ctx, root, extra, &out)
	return out
}

func (t *Teardown) newOutcome(v verdict.Verdict) Outcome {
	return Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: t.finderName()}
}

func (t *Teardown) finderName() string {
	switch len(t.finders) {
	case 0:
		return "root only"
	case 1:
		return t.finders[0].Name()
	}
	return t.finders[0].Name() + " and " + t.finders[1].Name()
}

// tree is the set of bound members of a teardown.
type tree struct {
	members []*pidfd.Handle
	owned   []*pidfd.Handle // handles this teardown opened and must close
	refused map[int32]bool  // pids reported, never signalled
	taken   int             // of Options.Budget, given back at the end
	full    bool            // the budget ran out: the finders are not asked again
}

func (tr *tree) has(pid int32) bool {
	return tr.refused[pid] || slices.ContainsFunc(tr.members, func(h *pidfd.Handle) bool { return h.Pid() == pid })
}

// member reports whether the instance pid@tok is a proven member.
func (tr *tree) member(pid int32, tok token.Token) bool {
	return slices.ContainsFunc(tr.members, func(h *pidfd.Handle) bool { return h.Pid() == pid && h.Token() == tok })
}

func (t *Teardown) run(ctx context.Context, root *pidfd.Handle, extra []*pidfd.Handle, out *Outcome) {
	tr := &tree{refused: map[int32]bool{}}
	if root != nil {
		tr.members = append(tr.members, root)
	}
	for _, h := range extra {
		if h != nil && !tr.has(h.Pid()) && t.admit(tr, h, out) {
			tr.members = append(tr.members, h)
		}
	}
	defer func() {
		for _, h := range tr.owned {
			h.Close()
		}
		if tr.taken > 0 {
			t.opts.Budget.Give(tr.taken)
		}
	}()
	out.Acted = true
	out.Incomplete = t.blind(tr.members)

	// 1. Stop the tree growing: SIGSTOP top-down, then look again for
	//    children forked before their parent stopped.
	t.signalAll(tr, tr.members, unix.SIGSTOP, out)
	t.grow(tr, out, unix.SIGSTOP)
	// 2. TERM, then CONT so a stopped process handles it.
	t.signalAll(tr, tr.members, unix.SIGTERM, out)
	t.signalAll(tr, tr.members, unix.SIGCONT, out)
	t.progress("SIGTERM to %d", len(tr.members))
	// 3. Grace, catching children born meanwhile.
	t.progress("waiting up to %v", t.opts.Grace)
	t.waitTree(ctx, tr, t.opts.Grace, out, unix.SIGTERM)
	// 4. KILL what is left, and anything born since, unless the caller
	//    stopped the teardown (a daemon stopping, Ctrl-C): then nothing
	//    more is sent, and what lives is reported.
	if ctx.Err() != nil {
		out.Error = "stopped before the grace period ended: nothing more was sent"
	} else if alive := live(tr.members); len(alive) > 0 {
		out.Escalated = true
		t.progress("SIGKILL to %d", len(alive))
		t.killAll(tr, alive, out)
		t.waitTree(context.WithoutCancel(ctx), tr, t.opts.KillWait, out, unix.SIGKILL)
	}
	targets := tr.members
	if root != nil && tr.refused[root.Pid()] {
		// The root, targeted and then refused by the kernel (its uids
		// changed during the teardown: signalAll), stays a target: a
		// caller who named it is not told it is dead while it lives.
		// Other members refused then are only reported, as one refused
		// when found is.
		targets = append([]*pidfd.Handle{root}, targets...)
	}
	for _, h := range targets {
		out.Targeted = append(out.Targeted, memberOf(h))
		if !h.Exited() {
			out.Survivors = append(out.Survivors, memberOf(h))
		}
	}
	out.Dead = len(out.Survivors) == 0
	if out.Incomplete == "" {
		// Asked once more: the first answer was given before any signal,
		// and members forked through the grace (up to an hour), a loss
		// among them unseen then.
		out.Incomplete = t.blindAtEnd(targets)
	}
}

// blind asks the finders why the members found from first (the root and
// the caller's extra members, before any is signalled) may not be the
// whole tree. A tree with a cgroup to search has no such hole: the cgroup
// holds every descendant, reparented or not.
func (t *Teardown) blind(first []*pidfd.Handle) string {
	if t.opts.Cgroup != "" || len(first) == 0 {
		return ""
	}
	for _, f := range t.finders {
		if b, ok := f.(blindFinder); ok {
			if why := b.Blind(first); why != "" {
				return why
			}
		}
	}
	return ""
}

// blindAtEnd is blind at the end of a teardown, over every member
// targeted (blindFinder.BlindAtEnd).
func (t *Teardown) blindAtEnd(targets []*pidfd.Handle) string {
	if t.opts.Cgroup != "" || len(targets) == 0 {
		return ""
	}
	for _, f := range t.finders {
		if b, ok := f.(blindFinder); ok {
			if why := b.BlindAtEnd(targets); why != "" {
				return why
			}
		}
	}
	return ""
}

// progress tells OnProgress a step, if it listens.
func (t *Teardown) progress(format string, args ...any) {
	if t.opts.OnProgress != nil {
		t.opts.OnProgress(fmt.Sprintf(format, args...))
	}
}

// admit checks a found member against the protected and principal rules.
// A member that fails them is reported in out.Unproven with the reason and
// never signalled; admit closes nothing.
func (t *Teardown) admit(tr *tree, h *pidfd.Handle, out *Outcome) bool {
	why, refused, held := t.refuse(h, tr.members)
	if !refused {
		return true
	}
	if held {
		out.Partial = true // a member alive that a later look may allow
	}
	tr.refused[h.Pid()] = true
	m := memberOf(h)
	m.Reason = why
	out.Unproven = append(out.Unproven, m)
	return false
}

// killAll sends SIGKILL to alive, the inits of pid namespaces each judged
// again by the namespace rule just before its own SIGKILL: a process
// entered into an init's namespace during the grace (root's nsenter)
// would die with the init, though the init was allowed when it was
// found. One refused now is reported and left alive (the outcome
// Partial). Judged one by one, right before each signal: judged all
// first, a review's root process entered one init's namespace while the
// others were judged, and died. A process entered between an init's
// judgement and its signal (microseconds) still dies with it: setns
// cannot be held off.
func (t *Teardown) killAll(tr *tree, alive []*pidfd.Handle, out *Outcome) {
	var rest, inits []*pidfd.Handle
	for _, h := range alive {
		if isNSInit(h.Pid()) {
			inits = append(inits, h)
		} else {
			rest = append(rest, h)
		}
	}
	t.signalAll(tr, rest, unix.SIGKILL, out)
	for _, h := range inits {
		if why, refused := t.namespaceRefuses(h, tr.members); refused && !h.Exited() {
			tr.refused[h.Pid()] = true
			out.Partial = true
			m := memberOf(h)
			m.Reason = why + ", found at the end of the grace: not killed"
			out.Unproven = append(out.Unproven, m)
			continue
		}
		t.signalAll(tr, []*pidfd.Handle{h}, unix.SIGKILL, out)
	}
}

// grow asks the finders for new members until they find none (or the
// budget has run out), sending sig to each new member as it is found.
func (t *Teardown) grow(tr *tree, out *Outcome, sig unix.Signal) []*pidfd.Handle {
	var added []*pidfd.Handle
	for round := 0; round < 64 && !tr.full; round++ {
		var fresh []*pidfd.Handle
		for _, f := range t.finders {
			if tr.full {
				break
			}
			found, unproven, err := f.Find(tr.members, t.opts.Budget)
			for _, u := range unproven {
				// One finder's doubt about a process another has
				// proven a member is no doubt.
				if !tr.member(u.Pid, u.Token) && !slices.ContainsFunc(out.Unproven, func(m Member) bool { return m.Pid == u.Pid }) {
					out.Unproven = append(out.Unproven, u)
				}
			}
			if errors.Is(err, ErrBudget) || errors.Is(err, ErrShort) {
				// Candidates left unbound live on unsignalled: this
				// teardown cannot be the claim's last.
				out.Partial = true
			}
			if errors.Is(err, ErrBudget) {
				// Reported once: the finders, which would find them
				// again at every look, are not asked again.
				tr.full = true
				for _, u := range unproven {
					tr.refused[u.Pid] = true
				}
			}
			// A spent budget or a want of descriptors alone is no error
			// (the members left unbound say it); joined with another (a
			// sync that timed out), it is.
			if !lacking(err) && out.Error == "" {
				out.Error = "finding members: " + err.Error()
			}
			for _, h := range found {
				if tr.has(h.Pid()) {
					h.Close()
					give(t.opts.Budget, 1)
					continue
				}
				if t.opts.Budget != nil {
					tr.taken++
				}
				tr.owned = append(tr.owned, h)
				if !t.admit(tr, h, out) {
					continue
				}
				// Proven now: a finder that doubted it before (a child
				// forked between its graph's look and its /proc walk)
				// no longer makes it an unproven process left.
				out.Unproven = slices.DeleteFunc(out.Unproven, func(m Member) bool { return m.Pid == h.Pid() && m.Token == h.Token() })
				fresh = append(fresh, h)
				tr.members = append(tr.members, h)
			}
		}
		if len(fresh) == 0 {
			return added
		}
		added = append(added, fresh...)
		t.signalAll(tr, fresh, sig, out)
	}
	return added
}

// Between two looks for members born meanwhile, a wait grows from
// lookFirst to lookMax (a member's exit ends it early). Each look reads
// /proc and the cgroup: at a fixed 10 ms, one user's 200 teardowns in an
// hour's grace kept both of this host's CPUs busy for that hour. With
// more than lookShare teardowns waiting in one ExitWaiter, each looks
// less often, so that together they look about lookShare times per
// lookMax (a thousand waiting teardowns took a CPU with lookMax alone).
const (
	lookFirst = 10 * time.Millisecond
	lookMax   = 500 * time.Millisecond
	lookShare = 100
)

// pollWait blocks this thread in poll(2) until one of fds is readable or
// d has passed, and reports whether one was.
func pollWait(fds []unix.PollFd, d time.Duration) bool {
	n, _ := unix.Poll(fds, int(max(d, time.Millisecond)/time.Millisecond))
	return n > 0
}

// waitTree waits until every member has exited or d passes, adopting and
// signalling (with sig, then SIGCONT) members born meanwhile.
func (t *Teardown) waitTree(ctx context.Context, tr *tree, d time.Duration, out *Outcome, sig unix.Signal) {
	deadline := time.Now().Add(d)
	every, most := lookFirst, lookMax
	if sig == unix.SIGKILL {
		most = 5 * lookFirst // what forks past SIGKILL is found at once
	} else if n := t.opts.Exits.Waits(); n > lookShare {
		most = lookMax * time.Duration(n) / lookShare
	}
	var fds []unix.PollFd
	for {
		if added := t.grow(tr, out, sig); len(added) > 0 && sig != unix.SIGKILL {
			t.signalAll(tr, added, unix.SIGCONT, out)
		}
		if end, ok := t.opts.GraceEnd.end(); ok && sig != unix.SIGKILL && end.Before(deadline) {
			deadline = end // a shorter grace asked meanwhile
		}
		alive := live(tr.members)
		if len(alive) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		fds = fds[:0]
		for _, h := range alive {
			fds = append(fds, unix.PollFd{Fd: int32(h.Fd()), Events: unix.POLLIN})
		}
		if t.opts.Exits.Wait(ctx, fds, min(every, time.Until(deadline))) {
			every = lookFirst
		} else {
			every = min(2*every, most) // nothing ended: look less often
		}
	}
}

// signalAll signals each live member of hs through its pidfd: the only
// way this package sends a signal. Each signal is counted in the outcome
// (sent, or failed) and told to OnSignal once. For a principal other than
// root the kernel judges each signal with the principal's uid (signalAs):
// a member it refuses (its uids changed since it was admitted) leaves the
// tree, reported with the reason, and is never signalled again.
func (t *Teardown) signalAll(tr *tree, hs []*pidfd.Handle, sig unix.Signal, out *Outcome) {
	var targets []*pidfd.Handle
	for _, h := range hs {
		if !h.Exited() && !tr.refused[h.Pid()] {
			targets = append(targets, h)
		}
	}
	if len(targets) == 0 {
		return
	}
	uid, as := t.actsFor()
	var errs []error
	if as {
		errs = signalAs(uid, targets, sig)
	} else {
		errs = make([]error, len(targets))
		for i, h := range targets {
			errs[i] = h.Signal(sig)
		}
	}
	var denied []*pidfd.Handle
	for i, h := range targets {
		err := errs[i]
		if err == nil {
			out.Signals[unix.SignalName(sig)]++
		} else {
			out.SignalsFailed++
			if as && errors.Is(err, unix.EPERM) {
				denied = append(denied, h)
			}
		}
		if t.opts.OnSignal != nil {
			t.opts.OnSignal(memberOf(h), sig, err)
		}
	}
	for _, h := range denied {
		tr.refused[h.Pid()] = true
		tr.members = slices.DeleteFunc(tr.members, func(m *pidfd.Handle) bool { return m == h })
		m := memberOf(h)
		m.Reason = fmt.Sprintf("uid %d may no longer signal it (its uids changed during the teardown): the kernel refused %s", uid, unix.SignalName(sig))
		out.Unproven = append(out.Unproven, m)
	}
}

// actsFor returns the uid whose rights the teardown's signals take, when
// they are not this process's own: a principal other than root and other
// than the uid this process runs as.
func (t *Teardown) actsFor() (uint32, bool) {
	p := t.opts.Principal
	if p == nil || *p == 0 || int(*p) == os.Geteuid() {
		return 0, false
	}
	return *p, true
}

func live(hs []*pidfd.Handle) []*pidfd.Handle {
	var out []*pidfd.Handle
	for _, h := range hs {
		if !h.Exited() {
			out = append(out, h)
		}
	}
	return out
}

func memberOf(h *pidfd.Handle) Member {
	return Member{Pid: h.Pid(), Token: h.Token()}
}
