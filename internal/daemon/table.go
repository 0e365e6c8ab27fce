package daemon

import (
	"fmt"

	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// This file is the daemon's one verdict→action table for claims. Release,
// the reconcile at startup, the periodic reaper, a holder's exit and a wall
// clock all ask Decide, and the executor (reconcile_linux.go) carries the
// decision out; nothing else decides what happens to a claim.

// Trigger is what asks for a decision.
type Trigger uint8

// Triggers.
const (
	// Startup: the reconcile before the daemon serves.
	Startup Trigger = iota + 1
	// Pass: the periodic reaper, an explicit reap, a child's or a root's
	// exit.
	Pass
	// ReleaseAsked: a caller released the claim (or killed its root).
	ReleaseAsked
	// WallClock: the claim's wall clock ran out.
	WallClock
	// HolderExit: the holder's exact instance was seen exiting.
	HolderExit
)

var triggerNames = [...]string{"", "startup", "pass", "release", "wall clock", "holder exit"}

func (t Trigger) String() string {
	if int(t) < len(triggerNames) {
		return triggerNames[t]
	}
	return fmt.Sprintf("trigger(%d)", t)
}

// Action is what the executor does to a claim.
type Action uint8

// Actions. Their text is what report items name.
const (
	// Keep: nothing to do; the claim stays running.
	Keep Action = iota + 1
	// Readopt: OWNED after a restart; admitted to the graph again.
	Readopt
	// TearDown: tear down the proven members (root, lineage, cgroup) and
	// close the claim, or leave it in Survivors.
	TearDown
	// Drop: the root's pid belongs to another instance; close unsignalled.
	Drop
	// LetGo: nothing of the claim is provably alive; close it, listing
	// what lives on unproven.
	LetGo
	// Finish: a job whose root is gone; record its end (exit code known
	// or not).
	Finish
	// Retire: a job that cannot be followed any more; close it with the
	// reason, its result still owed.
	Retire
	// Hold: unverifiable; keep it open and unsignalled.
	Hold
	// Refuse: a release of an unverifiable claim: nothing is signalled and
	// the caller is told why.
	Refuse
)

var actionNames = [...]string{"", "kept", "readopted", "torn_down", "dropped", "released", "exited", "retired", "kept_unverifiable", "refused"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// Input is everything the table looks at.
type Input struct {
	Kind    store.Kind
	State   store.State
	Trigger Trigger
	// Started: the root was recorded as started (pid not 0).
	Started bool
	// Root is the verdict on the root (zero when not Started).
	Root verdict.Result
	// Orphan: the grant's holder is GONE or FOREIGN, or its exit was seen.
	Orphan bool
	// Proven: processes proven to be the claim's (its own cgroup, or
	// survivors of an earlier teardown that are still OWNED) live on
	// beside a root that is not OWNED.
	Proven bool
}

// Decision is what to do, and the state the claim is left in when that
// does not depend on how the action goes (a teardown ends in Released or
// Survivors, said by the executor).
type Decision struct {
	Action Action
	State  store.State
}

// open lists the states of a claim that is not over: it counts as live for
// listings and quotas, and the reaper looks at it on every pass.
var open = []store.State{store.Running, store.Releasing, store.Survivors, store.Unverifiable}

// Open reports whether s is an open state; every other state is final.
func Open(s store.State) bool {
	for _, o := range open {
		if s == o {
			return true
		}
	}
	return false
}

// Decide is the verdict→action table.
func Decide(in Input) Decision {
	if !Open(in.State) {
		return Decision{Keep, in.State}
	}
	if !in.Started {
		// The daemon stopped during the launch. What its cgroup holds is
		// the claim's by construction; nothing else can be proven.
		if in.Proven {
			return Decision{TearDown, store.Releasing}
		}
		return Decision{LetGo, store.Released}
	}
	switch in.Root {
	case verdict.Owned:
		act := in.Trigger == ReleaseAsked || in.Trigger == WallClock ||
			in.State == store.Releasing || in.State == store.Survivors
		if in.Kind == store.Grant && (in.Orphan || in.Trigger == HolderExit) {
			act = true
		}
		switch {
		case act:
			return Decision{TearDown, store.Releasing}
		case in.Trigger == Startup:
			return Decision{Readopt, store.Running}
		}
		return Decision{Keep, store.Running}
	case verdict.Foreign, verdict.Gone:
		// Members the cgroup (or an earlier teardown) proves outlive the
		// root: the claim is still running until something ends it or
		// they have gone, a job as well as a grant (a job's exit code is
		// its root's, recorded when it came). A root whose pid was
		// reissued (FOREIGN) has exited as surely as a GONE one; only its
		// exit was not seen, so a job with nothing proven left is
		// retired, not finished, and such a grant is dropped.
		ended := in.Trigger == ReleaseAsked || in.Trigger == WallClock ||
			in.State == store.Releasing || in.State == store.Survivors ||
			in.Kind == store.Grant && (in.Orphan || in.Trigger == HolderExit)
		switch {
		case in.Proven && ended:
			return Decision{TearDown, store.Releasing}
		case in.Proven:
			return Decision{Keep, in.State}
		case in.Kind == store.Job && in.Root == verdict.Foreign:
			return Decision{Retire, store.Retired}
		case in.Kind == store.Job:
			return Decision{Finish, store.Exited}
		case in.Root == verdict.Foreign:
			return Decision{Drop, store.Dropped}
		}
		return Decision{LetGo, store.Released}
	}
	// UNVERIFIABLE, or a verdict the table does not know: never signal.
	switch {
	case in.Trigger == ReleaseAsked:
		if in.Kind == store.Job {
			return Decision{Refuse, in.State}
		}
		return Decision{Refuse, store.Unverifiable}
	case in.Kind == store.Job:
		return Decision{Retire, store.Retired}
	}
	return Decision{Hold, store.Unverifiable}
}

// afterTeardown is the state a claim is left in by a teardown: Survivors
// while any proven member lives (the reaper retries), else Released for a
// grant, and for a job Releasing until its exit is recorded.
func afterTeardown(kind store.Kind, survivors bool) store.State {
	switch {
	case survivors:
		return store.Survivors
	case kind == store.Job:
		return store.Releasing
	}
	return store.Released
}
