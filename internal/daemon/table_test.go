package daemon

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func TestDecide(t *testing.T) {
	const (
		G = store.Grant
		J = store.Job
	)
	type row struct {
		name string
		in   Input
		want Decision
	}
	started := func(k store.Kind, s store.State, trig Trigger, root verdict.Result) Input {
		return Input{Kind: k, State: s, Trigger: trig, Started: true, Root: root}
	}
	// proven: members the cgroup proves the claim's outlive the root.
	proven := func(in Input) Input {
		in.Proven = true
		return in
	}
	rows := []row{
		// Final states are never touched again.
		{"released stays", started(G, store.Released, Pass, verdict.Owned), Decision{Keep, store.Released}},
		{"exited job stays", started(J, store.Exited, ReleaseAsked, verdict.Owned), Decision{Keep, store.Exited}},
		// Never started: only the cgroup proves anything.
		{"not started, empty", Input{Kind: G, State: store.Running, Trigger: Startup}, Decision{LetGo, store.Released}},
		{"not started, cgroup holds processes", Input{Kind: G, State: store.Running, Trigger: Startup, Proven: true}, Decision{TearDown, store.Releasing}},
		{"job not started", Input{Kind: J, State: store.Running, Trigger: Pass}, Decision{LetGo, store.Released}},
		// OWNED grants.
		{"owned grant at startup", started(G, store.Running, Startup, verdict.Owned), Decision{Readopt, store.Running}},
		{"owned grant on a pass", started(G, store.Running, Pass, verdict.Owned), Decision{Keep, store.Running}},
		{"owned grant released", started(G, store.Running, ReleaseAsked, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned grant past its wall clock", started(G, store.Running, WallClock, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned grant, holder exit seen", started(G, store.Running, HolderExit, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned orphan on a pass", Input{Kind: G, State: store.Running, Trigger: Pass, Started: true, Root: verdict.Owned, Orphan: true}, Decision{TearDown, store.Releasing}},
		{"owned orphan at startup", Input{Kind: G, State: store.Running, Trigger: Startup, Started: true, Root: verdict.Owned, Orphan: true}, Decision{TearDown, store.Releasing}},
		{"owned grant with survivors retried", started(G, store.Survivors, Pass, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned grant whose release was cut short", started(G, store.Releasing, Startup, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned grant once unverifiable", started(G, store.Unverifiable, Pass, verdict.Owned), Decision{Keep, store.Running}},
		// OWNED jobs: a holder means nothing to a job.
		{"owned job at startup", started(J, store.Running, Startup, verdict.Owned), Decision{Readopt, store.Running}},
		{"owned job on a pass", started(J, store.Running, Pass, verdict.Owned), Decision{Keep, store.Running}},
		{"owned job released", started(J, store.Running, ReleaseAsked, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned job past its wall clock", started(J, store.Running, WallClock, verdict.Owned), Decision{TearDown, store.Releasing}},
		{"owned job, orphan flag ignored", Input{Kind: J, State: store.Running, Trigger: Pass, Started: true, Root: verdict.Owned, Orphan: true}, Decision{Keep, store.Running}},
		// FOREIGN: never signalled.
		{"foreign grant", started(G, store.Running, Pass, verdict.Foreign), Decision{Drop, store.Dropped}},
		{"foreign grant released", started(G, store.Running, ReleaseAsked, verdict.Foreign), Decision{Drop, store.Dropped}},
		{"foreign job", started(J, store.Running, Startup, verdict.Foreign), Decision{Retire, store.Retired}},
		{"foreign grant, cgroup not empty", proven(started(G, store.Running, Pass, verdict.Foreign)), Decision{Keep, store.Running}},
		{"foreign grant, cgroup not empty, startup", proven(started(G, store.Running, Startup, verdict.Foreign)), Decision{Keep, store.Running}},
		{"foreign grant, cgroup not empty, released", proven(started(G, store.Running, ReleaseAsked, verdict.Foreign)), Decision{TearDown, store.Releasing}},
		{"foreign grant, cgroup not empty, holder gone", proven(started(G, store.Running, HolderExit, verdict.Foreign)), Decision{TearDown, store.Releasing}},
		{"foreign job, cgroup not empty, released", proven(started(J, store.Running, ReleaseAsked, verdict.Foreign)), Decision{TearDown, store.Releasing}},
		{"foreign job, cgroup not empty", proven(started(J, store.Running, Pass, verdict.Foreign)), Decision{Keep, store.Running}},
		// GONE.
		{"gone grant", started(G, store.Running, Pass, verdict.Gone), Decision{LetGo, store.Released}},
		{"gone grant, cgroup holds processes", Input{Kind: G, State: store.Running, Trigger: WallClock, Started: true, Root: verdict.Gone, Proven: true}, Decision{TearDown, store.Releasing}},
		{"gone grant, survivors still owned", Input{Kind: G, State: store.Survivors, Trigger: Pass, Started: true, Root: verdict.Gone, Proven: true}, Decision{TearDown, store.Releasing}},
		{"gone grant, cgroup holds processes, on a pass", Input{Kind: G, State: store.Running, Trigger: Pass, Started: true, Root: verdict.Gone, Proven: true}, Decision{Keep, store.Running}},
		{"gone orphan, cgroup holds processes", Input{Kind: G, State: store.Running, Trigger: Pass, Started: true, Root: verdict.Gone, Proven: true, Orphan: true}, Decision{TearDown, store.Releasing}},
		{"gone job, cgroup holds processes", Input{Kind: J, State: store.Running, Trigger: Pass, Started: true, Root: verdict.Gone, Proven: true}, Decision{Keep, store.Running}},
		{"gone job, cgroup holds processes, startup", Input{Kind: J, State: store.Running, Trigger: Startup, Started: true, Root: verdict.Gone, Proven: true}, Decision{Keep, store.Running}},
		{"gone job, cgroup holds processes, released", Input{Kind: J, State: store.Running, Trigger: ReleaseAsked, Started: true, Root: verdict.Gone, Proven: true}, Decision{TearDown, store.Releasing}},
		{"gone job", started(J, store.Running, Pass, verdict.Gone), Decision{Finish, store.Exited}},
		{"gone job after its teardown", started(J, store.Releasing, Pass, verdict.Gone), Decision{Finish, store.Exited}},
		// UNVERIFIABLE: never signalled.
		{"unverifiable grant", started(G, store.Running, Pass, verdict.Unverifiable), Decision{Hold, store.Unverifiable}},
		{"unverifiable orphan", Input{Kind: G, State: store.Running, Trigger: HolderExit, Started: true, Root: verdict.Unverifiable, Orphan: true}, Decision{Hold, store.Unverifiable}},
		{"unverifiable grant released", started(G, store.Running, ReleaseAsked, verdict.Unverifiable), Decision{Refuse, store.Unverifiable}},
		{"unverifiable job", started(J, store.Running, Startup, verdict.Unverifiable), Decision{Retire, store.Retired}},
		{"unverifiable job released", started(J, store.Running, ReleaseAsked, verdict.Unverifiable), Decision{Refuse, store.Running}},
		{"no verdict at all", started(G, store.Running, Pass, 0), Decision{Hold, store.Unverifiable}},
	}
	for _, r := range rows {
		if got := Decide(r.in); got != r.want {
			t.Errorf("%s: Decide(%+v) = %v/%s, want %v/%s", r.name, r.in, got.Action, got.State, r.want.Action, r.want.State)
		}
	}
}

// TestDecideNeverSignalsUnproven walks every input: only an OWNED root, or
// members proven by a cgroup or as still-OWNED survivors, may lead to a
// teardown, and an open state never leads to a teardown on a pass unless
// something asked for it.
func TestDecideNeverSignalsUnproven(t *testing.T) {
	for _, k := range store.Kinds() {
		for _, s := range store.States() {
			for trig := Startup; trig <= HolderExit; trig++ {
				for _, root := range []verdict.Result{0, verdict.Owned, verdict.Foreign, verdict.Gone, verdict.Unverifiable} {
					for _, bits := range []uint8{0, 1, 2, 3, 4, 5, 6, 7} {
						in := Input{Kind: k, State: s, Trigger: trig, Root: root,
							Started: bits&1 != 0, Orphan: bits&2 != 0, Proven: bits&4 != 0}
						d := Decide(in)
						if d.Action == TearDown && !(in.Proven || (in.Started && root == verdict.Owned)) {
							t.Errorf("Decide(%+v) = TearDown without an OWNED root or proven members", in)
						}
						// On a pass, what asks is an earlier request (a
						// teardown under way), a grant's holder gone, or a
						// launch the daemon never finished.
						asked := s == store.Releasing || s == store.Survivors ||
							k == store.Grant && in.Orphan || !in.Started
						if d.Action == TearDown && trig == Pass && !asked {
							t.Errorf("Decide(%+v) = TearDown on a pass that nothing asked for", in)
						}
						if d.Action == TearDown && !Open(s) {
							t.Errorf("Decide(%+v) = TearDown of a final claim", in)
						}
						if !Open(s) && d.State != s {
							t.Errorf("Decide(%+v) moved a final claim to %s", in, d.State)
						}
					}
				}
			}
		}
	}
}

// TestReadmeTable checks that the README's reconcile table is the one
// Decide implements: the table is rendered from Decide and must appear in
// the README verbatim.
func TestReadmeTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := renderTable()
	if !strings.Contains(string(b), want) {
		t.Errorf("README.md does not hold the verdict table Decide implements; put this in it:\n\n%s", want)
	}
}

// renderTable renders Decide for a grant and a job in state running, one
// column per trigger, one row per root verdict.
func renderTable() string {
	var b strings.Builder
	triggers := []Trigger{Startup, Pass, ReleaseAsked, WallClock, HolderExit}
	b.WriteString("| claim | root verdict |")
	for _, tr := range triggers {
		fmt.Fprintf(&b, " %s |", tr)
	}
	b.WriteString("\n| --- | --- |")
	for range triggers {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	type variant struct {
		label string
		in    Input
	}
	var variants []variant
	for _, k := range store.Kinds() {
		for _, root := range []verdict.Result{verdict.Owned, verdict.Foreign, verdict.Gone, verdict.Unverifiable} {
			variants = append(variants, variant{string(k), Input{Kind: k, State: store.Running, Started: true, Root: root}})
		}
		variants = append(variants,
			variant{string(k) + ", cgroup not empty", Input{Kind: k, State: store.Running, Started: true, Root: verdict.Gone, Proven: true}},
			variant{string(k) + ", survivors", Input{Kind: k, State: store.Survivors, Started: true, Root: verdict.Owned}},
			variant{string(k) + ", never started", Input{Kind: k, State: store.Running}},
		)
	}
	variants = append(variants, variant{"grant, holder gone", Input{Kind: store.Grant, State: store.Running, Started: true, Root: verdict.Owned, Orphan: true}})
	for _, v := range variants {
		root := "-"
		if v.in.Started {
			root = v.in.Root.String()
		}
		fmt.Fprintf(&b, "| %s | %s |", v.label, root)
		for _, tr := range triggers {
			in := v.in
			in.Trigger = tr
			fmt.Fprintf(&b, " %s |", describe(in.Kind, Decide(in)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// describe renders a decision with the states a teardown can end in.
func describe(k store.Kind, d Decision) string {
	if d.Action != TearDown {
		return fmt.Sprintf("%s → %s", d.Action, d.State)
	}
	return fmt.Sprintf("%s → %s, or %s", d.Action, afterTeardown(k, false), afterTeardown(k, true))
}
