package actions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Finder finds the descendants of a tree being torn down. Given the members
// bound so far, it returns newly found members as bound handles, having
// proved each belongs to the tree (by observed lineage, or by a parent link
// read while the parent was a live member), and lists what it saw but could
// not prove. It must not return a handle whose pid is already a member.
type Finder interface {
	Find(members []*pidfd.Handle) (found []*pidfd.Handle, unproven []Member, err error)
	// Name says how members are found, for the outcome's Mechanism.
	Name() string
}

// Binder judges a claim and binds the judged instance (verdict.Judge).
type Binder interface {
	Bind(pid int32, claim string) (verdict.Verdict, *pidfd.Handle)
}

// Teardown tears down a process and its verified descendants.
type Teardown struct {
	Judge  Binder
	Finder Finder
	// Grace is how long members get to exit after SIGTERM (default 5s).
	Grace time.Duration
	// KillWait is how long to wait for SIGKILLed members (default 2s).
	KillWait time.Duration
	// OnSignal, when set, is told of every signal sent or refused.
	OnSignal func(m Member, sig unix.Signal, err error)

	// afterBind runs between the verdict and the first signal (tests).
	afterBind func()
}

// DefaultGrace is the grace period when none is given.
const DefaultGrace = 5 * time.Second

// ErrProtected is reported for a pid the supervisor never signals (init,
// itself).
var ErrProtected = errors.New("protected process")

// Run judges the claim (pid, token) and, only if it is OWNED, tears down the
// process and the descendants its Finder proves. Anything not OWNED is
// reported and left alone.
func (t *Teardown) Run(ctx context.Context, pid int32, claim string) Outcome {
	v, root := t.Judge.Bind(pid, claim)
	out := Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: t.finderName()}
	if root == nil {
		if v.Result == verdict.Gone {
			// Nothing of ours is alive at the pid. A group that outlives its
			// leader cannot be proven ours: report it, never signal it.
			out.Unproven = groupMembers(pid)
			out.Dead = len(out.Unproven) == 0
		}
		return out
	}
	defer root.Close()
	if pid == 1 || int(pid) == os.Getpid() {
		out.Error = fmt.Sprintf("pid %d: %v", pid, ErrProtected)
		return out
	}
	if t.afterBind != nil {
		t.afterBind()
	}
	t.tearDown(ctx, root, &out)
	return out
}

// RunBound tears down an already judged and bound root (verdict v must be
// OWNED), with extra members the caller has bound itself. The handles stay
// owned by the caller.
func (t *Teardown) RunBound(ctx context.Context, v verdict.Verdict, root *pidfd.Handle, extra []*pidfd.Handle) Outcome {
	out := Outcome{Verdict: v, Signals: map[string]int{}, Mechanism: t.finderName()}
	if v.Result != verdict.Owned || root == nil {
		out.Error = "refusing to act without an OWNED verdict bound to a handle"
		return out
	}
	if root.Pid() == 1 || int(root.Pid()) == os.Getpid() {
		out.Error = fmt.Sprintf("pid %d: %v", root.Pid(), ErrProtected)
		return out
	}
	t.tearDownWith(ctx, root, extra, &out)
	return out
}

func (t *Teardown) finderName() string {
	if t.Finder == nil {
		return "root only"
	}
	return t.Finder.Name()
}

// tree is the set of bound members of a teardown.
type tree struct {
	members []*pidfd.Handle
	owned   []*pidfd.Handle // handles this teardown opened and must close
}

func (tr *tree) has(pid int32) bool {
	return slices.ContainsFunc(tr.members, func(h *pidfd.Handle) bool { return h.Pid() == pid })
}

func (t *Teardown) tearDown(ctx context.Context, root *pidfd.Handle, out *Outcome) {
	t.tearDownWith(ctx, root, nil, out)
}

func (t *Teardown) tearDownWith(ctx context.Context, root *pidfd.Handle, extra []*pidfd.Handle, out *Outcome) {
	out.Acted = true
	tr := &tree{members: []*pidfd.Handle{root}}
	for _, h := range extra {
		if h != nil && !tr.has(h.Pid()) {
			tr.members = append(tr.members, h)
		}
	}
	defer func() {
		for _, h := range tr.owned {
			h.Close()
		}
	}()

	// 1. Stop the tree growing: SIGSTOP top-down, then look again for
	//    children forked before their parent stopped.
	t.signalAll(tr, tr.members, unix.SIGSTOP, out, 0)
	t.grow(tr, out, unix.SIGSTOP)
	// 2. TERM, then CONT so a stopped process handles it.
	group := t.groupSignal(tr, root)
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGCONT} {
		t.signalAll(tr, tr.members, sig, out, group)
	}
	// 3. Grace, catching children born meanwhile.
	grace := t.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	t.waitTree(ctx, tr, grace, out, unix.SIGTERM)
	// 4. KILL what is left, and anything born since.
	if alive := live(tr.members); len(alive) > 0 {
		out.Escalated = true
		group = t.groupSignal(tr, root)
		t.signalAll(tr, alive, unix.SIGKILL, out, group)
		kw := t.KillWait
		if kw <= 0 {
			kw = 2 * time.Second
		}
		t.waitTree(context.WithoutCancel(ctx), tr, kw, out, unix.SIGKILL)
	}
	for _, h := range tr.members {
		out.Targeted = append(out.Targeted, memberOf(h))
		if !h.Exited() {
			out.Survivors = append(out.Survivors, memberOf(h))
		}
	}
	out.Dead = len(out.Survivors) == 0
}

// grow asks the finder for new members until it finds none, sending sig to
// each new member as it is found.
func (t *Teardown) grow(tr *tree, out *Outcome, sig unix.Signal) []*pidfd.Handle {
	var added []*pidfd.Handle
	if t.Finder == nil {
		return nil
	}
	for round := 0; round < 64; round++ {
		found, unproven, err := t.Finder.Find(tr.members)
		for _, u := range unproven {
			if !slices.Contains(out.Unproven, u) {
				out.Unproven = append(out.Unproven, u)
			}
		}
		if err != nil && out.Error == "" {
			out.Error = "finding members: " + err.Error()
		}
		var fresh []*pidfd.Handle
		for _, h := range found {
			if tr.has(h.Pid()) {
				h.Close()
				continue
			}
			fresh = append(fresh, h)
			tr.members = append(tr.members, h)
			tr.owned = append(tr.owned, h)
		}
		if len(fresh) == 0 {
			return added
		}
		added = append(added, fresh...)
		t.signalAll(tr, fresh, sig, out, 0)
	}
	return added
}

// waitTree waits until every member has exited or d passes, adopting and
// signalling (with sig, then SIGCONT) members born meanwhile.
func (t *Teardown) waitTree(ctx context.Context, tr *tree, d time.Duration, out *Outcome, sig unix.Signal) {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if added := t.grow(tr, out, sig); len(added) > 0 && sig != unix.SIGKILL {
			t.signalAll(tr, added, unix.SIGCONT, out, 0)
		}
		if len(live(tr.members)) == 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// groupSignal returns the process group that may be signalled with killpg:
// the root's own group, only while the root leads it, is alive, and every
// process in the group is a bound member. Otherwise 0.
func (t *Teardown) groupSignal(tr *tree, root *pidfd.Handle) int32 {
	if root.Stat().PGrp != root.Pid() || root.Exited() {
		return 0
	}
	for _, m := range groupMembers(root.Pid()) {
		if !tr.has(m.Pid) {
			return 0
		}
	}
	return root.Pid()
}

func (t *Teardown) signalAll(tr *tree, hs []*pidfd.Handle, sig unix.Signal, out *Outcome, pgid int32) {
	if pgid > 0 && !tr.members[0].Exited() {
		// The leader is alive and OWNED, so the group id still names its
		// group; every member of that group is a bound member.
		if err := unix.Kill(-int(pgid), sig); err == nil {
			out.Signals[unix.SignalName(sig)+" (group)"]++
		}
	}
	for _, h := range hs {
		if h.Exited() {
			continue
		}
		err := h.Signal(sig)
		if err == nil {
			out.Signals[unix.SignalName(sig)]++
		}
		if t.OnSignal != nil {
			t.OnSignal(memberOf(h), sig, err)
		}
	}
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
	return Member{Pid: h.Pid(), Token: h.Token().String()}
}
