package xnu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Options tune a Teardown. The zero Options are valid.
type Options struct {
	// Grace is how long members get to exit after SIGTERM
	// (actions.DefaultGrace when 0); KillWait after SIGKILL (2s when 0).
	Grace, KillWait time.Duration
	// Step is the longest wait between two looks (100ms when 0).
	Step time.Duration
	// Self is this process (never signalled, nor its ancestors); Protected
	// adds pids never signalled, with their ancestors. Pids 0 and 1
	// (kernel, launchd) are always protected.
	Self      int32
	Protected []int32
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnSignal is told of every signal sent or refused.
	OnSignal func(m token.Instance, sig unix.Signal, err error)
}

// TeardownMechanism is the outcome's Mechanism.
const TeardownMechanism = "xnu: uniqueid lineage, proc_signal_with_audittoken"

// Teardown judges the claim and tears down its instance and every recorded
// descendant: SIGSTOP top-down while looking again for children forked
// meanwhile, then SIGTERM and SIGCONT, the grace period (watching with w
// and rescanning on every fork), SIGKILL for what is left, and a last look.
// Every signal goes through the audit token of the reply that last judged
// the member: an ESRCH is followed by one new reply, and a signal is retried
// once only when that reply has the same uniqueid (the member exec'd); any
// other uniqueid holds the pid now and is never signalled. A root that is
// GONE but whose claim carries a uniqueid still has provable descendants
// (their p_puniqueid), which are torn down; if that uniqueid is alive at
// another pid, the claim is refused. w may be nil (polling only).
// Nothing is signalled where Kernel.CanSignal fails.
func Teardown(ctx context.Context, k Kernel, w Watcher, boot procfs.BootID, pid int32, claim token.Token, o Options) actions.Outcome {
	out := actions.Outcome{Signals: map[string]int{}, Mechanism: TeardownMechanism}
	v, root := Judge(k, boot, pid, claim)
	out.Verdict = v
	var l *Lineage
	switch {
	case v.Result == verdict.Owned:
		l = NewLineage(k, root)
	case v.Result == verdict.Gone && claim.Uniq != 0 && claim.Boot == boot:
		l = NewGoneLineage(k, claim.Uniq)
	default:
		// Nothing of ours is alive at the pid, or nothing is proven ours.
		out.Dead = v.Result == verdict.Gone
		return out
	}
	if err := k.CanSignal(); err != nil {
		out.Error = "not signalled: " + err.Error() + "; kill(2) names a pid, not an instance, so it is never used instead"
		return out
	}
	t := &teardown{k: k, w: w, boot: boot, o: o.withDefaults(), l: l, out: &out, sent: map[uint64]bool{}}
	if w == nil {
		t.w = sleeper{}
	}
	if err := t.run(ctx); err != nil {
		out.Error = err.Error()
	}
	for _, m := range l.Members() {
		if t.sent[m.UniqueID] {
			out.Targeted = append(out.Targeted, m.instance(boot, ""))
			if !m.Gone {
				out.Survivors = append(out.Survivors, m.instance(boot, ""))
			}
		}
	}
	out.Unproven = append(out.Unproven, l.Unproven(boot)...)
	out.Acted = len(out.Targeted) > 0
	out.Dead = len(out.Survivors) == 0 && out.Error == "" && (v.Result == verdict.Owned || len(out.Unproven) == 0)
	return out
}

func (o Options) withDefaults() Options {
	if o.Grace <= 0 {
		o.Grace = actions.DefaultGrace
	}
	if o.KillWait <= 0 {
		o.KillWait = 2 * time.Second
	}
	if o.Step <= 0 {
		o.Step = 100 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func (m *Member) instance(boot procfs.BootID, why string) token.Instance {
	return token.Instance{Pid: m.Pid, Token: m.Token(boot), Reason: why}
}

type teardown struct {
	k       Kernel
	w       Watcher
	boot    procfs.BootID
	o       Options
	l       *Lineage
	out     *actions.Outcome
	sent    map[uint64]bool // members signalled at least once
	protect map[uint64]bool // uniqueids never signalled
	stopped bool
}

func (t *teardown) run(ctx context.Context) error {
	if _, err := t.l.Scan(); err != nil {
		return err
	}
	if root := t.l.members[t.l.root]; t.out.Verdict.Result != verdict.Owned && !root.Gone {
		return fmt.Errorf("refused: the token's instance is alive at pid %d, not at the claimed pid %d", root.Pid, t.out.Verdict.Pid)
	}
	t.protect = t.protectedSet()
	if t.protect[t.l.root] {
		return errors.New("refused: the root is a protected process (launchd, the supervisor or one of its ancestors)")
	}
	t.l.Watch(t.w)
	// Stop the tree from growing: stop what is known, look again, until a
	// look finds nothing new.
	for round := 0; round < 8; round++ {
		t.signalLive(unix.SIGSTOP)
		found, err := t.l.Scan()
		if err != nil {
			return err
		}
		t.l.Watch(t.w)
		if len(found) == 0 {
			break
		}
	}
	t.stopped = true
	t.signalLive(unix.SIGTERM)
	t.signalLive(unix.SIGCONT)
	if t.wait(ctx, t.o.Grace, unix.SIGTERM) {
		return nil
	}
	t.out.Escalated = true
	t.signalLive(unix.SIGKILL)
	t.wait(ctx, t.o.KillWait, unix.SIGKILL)
	return nil
}

// wait waits up to d for every member to be gone, rescanning on every fork
// note and every step; members found meanwhile get sig (and SIGCONT after
// SIGTERM). It reports whether all are gone.
func (t *teardown) wait(ctx context.Context, d time.Duration, sig unix.Signal) bool {
	deadline := t.o.Now().Add(d)
	for {
		if len(t.live()) == 0 {
			return true
		}
		left := deadline.Sub(t.o.Now())
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		_, _, _ = t.l.Pump(t.w, min(left, t.o.Step))
		if _, err := t.l.Scan(); err != nil {
			continue
		}
		t.l.Watch(t.w)
		for _, m := range t.live() {
			if !t.sent[m.UniqueID] {
				t.signal(m, sig)
				if sig == unix.SIGTERM {
					t.signal(m, unix.SIGCONT)
				}
			}
		}
	}
}

// live returns the members still alive that may be signalled.
func (t *teardown) live() []*Member {
	var out []*Member
	for _, m := range t.l.Live() {
		if !t.protect[m.UniqueID] {
			out = append(out, m)
		}
	}
	return out
}

func (t *teardown) signalLive(sig unix.Signal) {
	for _, m := range t.live() {
		t.signal(m, sig)
	}
}

// signal sends sig to m through the audit token of m's last reply. After
// ESRCH, one new reply decides: the same uniqueid at another pid version
// (an exec) is signalled once more with the new token; another uniqueid
// (the pid was reissued) or none means m is gone.
func (t *teardown) signal(m *Member, sig unix.Signal) {
	err := t.k.Signal(m.AuditToken(), sig)
	if errors.Is(err, ErrNoProcess) {
		id, ierr := t.k.Identity(m.Pid)
		switch {
		case ierr == nil && id.UniqueID == m.UniqueID && id.IDVersion != m.IDVersion:
			m.Ident = id
			err = t.k.Signal(id.AuditToken(), sig)
		case ierr == nil && id.UniqueID != m.UniqueID:
			m.Gone = true
			err = fmt.Errorf("pid %d now holds uniqueid %d, not member %d: not signalled: %w", m.Pid, id.UniqueID, m.UniqueID, ErrNoProcess)
		case ierr != nil && !errors.Is(ierr, ErrNoProcess):
			// Unknown: neither gone nor signalled; a survivor unless a
			// later look proves otherwise.
			err = fmt.Errorf("pid %d: signal refused and identity unreadable: %w", m.Pid, ierr)
		default:
			m.Gone = true
		}
	}
	if t.o.OnSignal != nil {
		t.o.OnSignal(m.instance(t.boot, ""), sig, err)
	}
	switch {
	case err == nil:
		t.sent[m.UniqueID] = true
		t.out.Signals[sigName(sig)]++
	case errors.Is(err, ErrNoProcess):
		m.Gone = true
	default:
		t.out.SignalsFailed++
	}
}

// protectedSet returns the uniqueids never signalled: pids 0 and 1, Self,
// Protected, and the ancestors of each by p_puniqueid in the last look.
func (t *teardown) protectedSet() map[uint64]bool {
	set := map[uint64]bool{}
	pids := append([]int32{0, 1, t.o.Self}, t.o.Protected...)
	for _, pid := range pids {
		id, err := t.k.Identity(pid)
		if err != nil {
			continue
		}
		for u := id.UniqueID; u != 0 && !set[u]; {
			set[u] = true
			parent, ok := t.l.last[u]
			if !ok {
				break
			}
			u = parent.PUniqueID
		}
	}
	for u, m := range t.l.members {
		if set[u] && u != t.l.root {
			t.out.Unproven = append(t.out.Unproven, m.instance(t.boot, "protected: launchd, the supervisor or one of its ancestors"))
		}
	}
	return set
}

func sigName(s unix.Signal) string {
	switch s {
	case unix.SIGSTOP:
		return "SIGSTOP"
	case unix.SIGCONT:
		return "SIGCONT"
	case unix.SIGTERM:
		return "SIGTERM"
	case unix.SIGKILL:
		return "SIGKILL"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// sleeper is the Watcher of a teardown without a kqueue: it only waits.
type sleeper struct{}

func (sleeper) Attach(int32) error { return nil }
func (sleeper) Detach(int32) error { return nil }
func (sleeper) Wait(d time.Duration) ([]Note, error) {
	time.Sleep(d)
	return nil, nil
}
