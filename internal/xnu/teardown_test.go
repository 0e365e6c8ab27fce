package xnu

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

var simBoot = procfs.BootID{0x6d, 0x61, 0x63}

// openswarm builds the desktop app's world: launchd -> backend (python) ->
// run.sh (bash wrapper, the recorded runtime) -> vite (node) -> esbuild;
// the supervisor itself under a terminal; the user's own node elsewhere.
type world struct {
	s                                    *sim
	backend, wrapper, vite, esbuild      *simProc
	terminal, self, userNode, userParent *simProc
}

func openswarm(t *testing.T) world {
	t.Helper()
	s := newSim(400)
	launchd := s.procs[1]
	w := world{s: s}
	w.terminal = s.fork(launchd, "Terminal")
	w.self = s.fork(w.terminal, "supervisor")
	w.backend = s.fork(launchd, "python")
	w.wrapper = s.fork(w.backend, "bash")
	w.vite = s.fork(w.wrapper, "node")
	w.esbuild = s.fork(w.vite, "esbuild")
	w.userParent = s.fork(launchd, "zsh")
	w.userNode = s.fork(w.userParent, "node")
	return w
}

func (w world) opts() Options {
	return Options{Self: w.self.pid, Now: w.s.now, Grace: time.Second, Step: 50 * time.Millisecond}
}

func claimOf(t *testing.T, s *sim, p *simProc) token.Token {
	t.Helper()
	tok, err := ReadToken(s, simBoot, p.pid)
	if err != nil {
		t.Fatalf("ReadToken(%d) = %v", p.pid, err)
	}
	if tok.Uniq != p.uniq || tok.Prec != token.Micro {
		t.Fatalf("ReadToken(%d) = %v, want a µs token with uniqueid %d", p.pid, tok, p.uniq)
	}
	return tok
}

// checkDeliveries fails if any signal reached an instance that is not the
// root or its descendant, or that the outcome does not list as targeted.
func checkDeliveries(t *testing.T, s *sim, root uint64, targeted []token.Instance) {
	t.Helper()
	recorded := map[uint64]bool{}
	for _, m := range targeted {
		recorded[m.Token.Uniq] = true
	}
	for _, d := range s.delivered {
		if !s.descends(d.uniq, root) {
			t.Fatalf("%v reached uniqueid %d (pid %d, %s), not in the tree of %d", d.sig, d.uniq, d.pid, s.all[d.uniq].name, root)
		}
		if !recorded[d.uniq] {
			t.Fatalf("%v reached uniqueid %d (pid %d), which the teardown did not record (targeted %v)", d.sig, d.uniq, d.pid, targeted)
		}
	}
}

func TestOpenswarmGhostsAfterTheBackendDies(t *testing.T) {
	w := openswarm(t)
	claim := claimOf(t, w.s, w.wrapper)
	w.s.exit(w.backend) // the backend dies: run.sh is reparented to launchd
	w.s.reap(w.backend)
	if w.wrapper.ppid != 1 {
		t.Fatalf("wrapper ppid = %d, want 1", w.wrapper.ppid)
	}
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.wrapper.pid, claim, w.opts())
	if out.Verdict.Result != verdict.Owned || !out.Dead || out.Error != "" {
		t.Fatalf("Teardown = %+v, want OWNED and dead", out)
	}
	for _, p := range []*simProc{w.wrapper, w.vite, w.esbuild} {
		if !p.zombie {
			t.Errorf("%s (pid %d) survived", p.name, p.pid)
		}
	}
	for _, p := range []*simProc{w.userNode, w.userParent, w.self, w.terminal} {
		if p.zombie {
			t.Errorf("%s (pid %d) was killed: not ours", p.name, p.pid)
		}
	}
	if len(out.Targeted) != 3 {
		t.Errorf("targeted %v, want the wrapper, vite and esbuild", out.Targeted)
	}
	checkDeliveries(t, w.s, w.wrapper.uniq, out.Targeted)
}

func TestGoneRootStillHasProvableDescendants(t *testing.T) {
	w := openswarm(t)
	claim := claimOf(t, w.s, w.wrapper)
	w.s.exit(w.wrapper)
	w.s.reap(w.wrapper)
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.wrapper.pid, claim, w.opts())
	if out.Verdict.Result != verdict.Gone || !out.Acted || !out.Dead {
		t.Fatalf("Teardown = %+v, want GONE, acted, dead", out)
	}
	if !w.vite.zombie || !w.esbuild.zombie || w.userNode.zombie {
		t.Errorf("vite %v esbuild %v userNode %v dead; want vite and esbuild only", w.vite.zombie, w.esbuild.zombie, w.userNode.zombie)
	}
	checkDeliveries(t, w.s, w.wrapper.uniq, out.Targeted)
}

func TestGoneClaimWhoseInstanceLivesElsewhereIsRefused(t *testing.T) {
	w := openswarm(t)
	claim := claimOf(t, w.s, w.vite)
	out := Teardown(context.Background(), w.s, w.s, simBoot, 399, claim, w.opts())
	if out.Verdict.Result != verdict.Gone || out.Acted || !strings.Contains(out.Error, "alive at pid") || len(w.s.delivered) != 0 {
		t.Fatalf("Teardown(399, vite's token) = %+v, want GONE and refused", out)
	}
}

func TestReissuedPidIsForeign(t *testing.T) {
	w := openswarm(t)
	w.s.adversarial = true
	claim := claimOf(t, w.s, w.wrapper)
	w.s.exit(w.wrapper)
	w.s.reap(w.wrapper)
	stranger := w.s.fork(w.userParent, "node")
	if stranger.pid != w.wrapper.pid {
		t.Fatalf("stranger pid %d, want the reaped %d", stranger.pid, w.wrapper.pid)
	}
	out := Teardown(context.Background(), w.s, w.s, simBoot, stranger.pid, claim, w.opts())
	if out.Verdict.Result != verdict.Foreign || out.Acted || stranger.zombie || len(w.s.delivered) != 0 {
		t.Fatalf("Teardown = %+v (stranger dead %v, %d deliveries), want FOREIGN and nothing signalled", out, stranger.zombie, len(w.s.delivered))
	}
}

func TestExecAfterJudgeIsRetriedOnce(t *testing.T) {
	w := openswarm(t)
	claim := claimOf(t, w.s, w.vite)
	execd := false
	w.s.onSignal = func(AuditToken) {
		if !execd { // the root execs between the verdict and the first signal
			execd = true
			w.s.exec(w.vite, "node2")
		}
	}
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.vite.pid, claim, w.opts())
	if !out.Dead || !w.vite.zombie {
		t.Fatalf("Teardown = %+v, vite dead %v, want dead after one retry", out, w.vite.zombie)
	}
	if len(w.s.delivered) == 0 || w.s.delivered[0].uniq != w.vite.uniq || w.s.delivered[0].sig != unix.SIGSTOP {
		t.Errorf("first delivery %+v, want SIGSTOP to vite after the exec", w.s.delivered)
	}
	checkDeliveries(t, w.s, w.vite.uniq, out.Targeted)
}

func TestReissueBetweenJudgeAndSignalIsNeverSignalled(t *testing.T) {
	w := openswarm(t)
	w.s.adversarial = true
	claim := claimOf(t, w.s, w.esbuild)
	var stranger *simProc
	w.s.onSignal = func(AuditToken) {
		if stranger == nil { // esbuild exits, is reaped, its pid goes to a stranger
			w.s.exit(w.esbuild)
			w.s.reap(w.esbuild)
			stranger = w.s.fork(w.userParent, "node")
		}
	}
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.esbuild.pid, claim, w.opts())
	if stranger == nil || stranger.pid != w.esbuild.pid {
		t.Fatalf("the adversary did not land on the pid: %+v", stranger)
	}
	if stranger.zombie || stranger.stopped || len(w.s.delivered) != 0 {
		t.Fatalf("stranger signalled: %+v, deliveries %+v, outcome %+v", stranger, w.s.delivered, out)
	}
}

func TestSymbolAbsentRefusesAndNeverKills(t *testing.T) {
	w := openswarm(t)
	w.s.symbol = false
	claim := claimOf(t, w.s, w.wrapper)
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.wrapper.pid, claim, w.opts())
	if out.Verdict.Result != verdict.Owned || out.Acted || !strings.Contains(out.Error, "14.4") || !strings.Contains(out.Error, "kill(2)") {
		t.Fatalf("Teardown = %+v, want OWNED, not acted, and why", out)
	}
	if w.s.kills != 0 || len(w.s.delivered) != 0 || w.s.calls["Signal"] != 0 || w.wrapper.zombie {
		t.Errorf("kill(2) %d, deliveries %d, Signal calls %d: want none", w.s.kills, len(w.s.delivered), w.s.calls["Signal"])
	}
}

// TestNoPidAddressedKill reads this package's and internal/local's darwin
// sources: nothing may call kill(2) (unix.Kill, syscall.Kill) there.
func TestNoPidAddressedKill(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("../local/*_darwin.go")
	files = append(files, more...)
	re := regexp.MustCompile(`\b(unix|syscall)\.Kill\(|\bKill\(\s*int`)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if re.Match(b) {
			t.Errorf("%s calls a pid-addressed kill", f)
		}
	}
	if n < 5 {
		t.Fatalf("read %d source files, want the package's", n)
	}
}

func TestProtectedRootRefused(t *testing.T) {
	w := openswarm(t)
	claim := claimOf(t, w.s, w.terminal) // the supervisor's own ancestor
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.terminal.pid, claim, w.opts())
	if out.Acted || !strings.Contains(out.Error, "protected") || w.terminal.zombie || w.self.zombie {
		t.Fatalf("Teardown = %+v, want refused", out)
	}
}

func TestChildrenBornDuringTheGracePeriodAreCaught(t *testing.T) {
	w := openswarm(t)
	w.vite.ignoresTerm = true
	claim := claimOf(t, w.s, w.wrapper)
	var late *simProc
	w.s.between = func() {
		if late == nil && w.s.calls["Wait"] > 0 && !w.vite.zombie && !w.vite.stopped {
			late = w.s.fork(w.vite, "worker") // forked after SIGCONT
			late.ignoresTerm = true
		}
	}
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.wrapper.pid, claim, w.opts())
	if late == nil {
		t.Fatal("no child was forked during the grace period")
	}
	if !out.Dead || !out.Escalated || !late.zombie || !w.vite.zombie {
		t.Fatalf("Teardown = %+v; late dead %v vite dead %v, want all dead after SIGKILL", out, late.zombie, w.vite.zombie)
	}
	checkDeliveries(t, w.s, w.wrapper.uniq, out.Targeted)
}

func TestUnreadableMemberIsNeverTakenForDead(t *testing.T) {
	w := openswarm(t)
	w.vite.ignoresTerm = true
	claim := claimOf(t, w.s, w.wrapper)
	w.s.between = func() {
		if w.s.calls["Wait"] > 0 { // unreadable from now on, and no kqueue note to say it exited
			w.s.idErr[w.vite.pid] = errors.New("EIO")
			delete(w.s.knotes, w.vite.pid)
		}
	}
	out := Teardown(context.Background(), w.s, w.s, simBoot, w.wrapper.pid, claim, w.opts())
	found := false
	for _, m := range out.Survivors {
		found = found || m.Pid == w.vite.pid
	}
	if out.Dead || !found {
		t.Fatalf("Teardown = %+v, want vite (unreadable) reported as a survivor", out)
	}
	checkDeliveries(t, w.s, w.wrapper.uniq, out.Targeted)
}

func TestJudge(t *testing.T) {
	w := openswarm(t)
	good := claimOf(t, w.s, w.vite)
	noUniq := good
	noUniq.Uniq = 0
	otherUniq := good
	otherUniq.Uniq = good.Uniq + 1000
	otherBoot := good
	otherBoot.Boot = procfs.BootID{9}
	tests := []struct {
		name  string
		pid   int32
		claim token.Token
		f17   bool
		want  verdict.Result
	}{
		{"same instance", w.vite.pid, good, false, verdict.Owned},
		{"same instance, flavor 17 only", w.vite.pid, good, true, verdict.Owned},
		{"no uniqueid, same µs", w.vite.pid, noUniq, false, verdict.Owned},
		{"no uniqueid, flavor 17 only", w.vite.pid, noUniq, true, verdict.Unverifiable},
		{"other uniqueid", w.vite.pid, otherUniq, false, verdict.Foreign},
		{"other boot", w.vite.pid, otherBoot, false, verdict.Foreign},
		{"no pid", 399, good, false, verdict.Gone},
		{"no claim", w.vite.pid, token.Token{}, false, verdict.Unverifiable},
	}
	for _, tt := range tests {
		w.s.ident17[tt.pid] = tt.f17
		v, _ := Judge(w.s, simBoot, tt.pid, tt.claim)
		if v.Result != tt.want || v.Reason == "" || v.Mechanism != Mechanism {
			t.Errorf("%s: Judge = %v, want %v", tt.name, v, tt.want)
		}
	}
	w.s.idErr[w.vite.pid] = errors.New("EIO")
	if v, _ := Judge(w.s, simBoot, w.vite.pid, good); v.Result != verdict.Unverifiable {
		t.Errorf("Judge with a failing read = %v, want UNVERIFIABLE", v)
	}
}

func TestWithStartBracketsTheStartTime(t *testing.T) {
	reads := []Ident{{Pid: 5, UniqueID: 7}, {Pid: 5, UniqueID: 7}}
	i := 0
	read := func() (Ident, error) { id := reads[i]; i++; return id, nil }
	id, err := withStart(read, func() (uint64, error) { return 42, nil })
	if err != nil || id.StartMicro != 42 {
		t.Errorf("withStart = %+v, %v, want start 42", id, err)
	}
	reads, i = []Ident{{Pid: 5, UniqueID: 7}, {Pid: 5, UniqueID: 8}}, 0
	if id, err = withStart(read, func() (uint64, error) { return 42, nil }); err != nil || id.StartMicro != 0 || id.UniqueID != 8 {
		t.Errorf("withStart across a reissue = %+v, %v, want the later reply without a start time", id, err)
	}
}

// TestLineageFollowRecordsIntermediates: a chain root -> A -> B where A
// exits is provable only if A was recorded while it lived. With kqueue
// rescans (Pump) between the events it is; without them B is reported,
// never a member.
func TestLineageFollowRecordsIntermediates(t *testing.T) {
	for _, follow := range []bool{true, false} {
		s := newSim(400)
		root := s.fork(s.procs[1], "root")
		rid, _ := s.Identity(root.pid)
		l := NewLineage(s, rid)
		if _, err := l.Scan(); err != nil {
			t.Fatal(err)
		}
		l.Watch(s)
		a := s.fork(root, "a")
		if follow {
			if ran, _, _ := l.Pump(s, 0); !ran {
				t.Fatal("a fork of the root did not trigger a rescan")
			}
		}
		b := s.fork(a, "b")
		if follow {
			l.Pump(s, 0)
		}
		s.exit(a)
		s.reap(a)
		l.Pump(s, 0)
		if _, err := l.Scan(); err != nil {
			t.Fatal(err)
		}
		if got := l.Recorded(b.uniq); got != follow {
			t.Errorf("follow %v: B recorded = %v", follow, got)
		}
		unproven := l.Unproven(simBoot)
		if !follow && (len(unproven) != 1 || unproven[0].Pid != b.pid) {
			t.Errorf("without rescans Unproven = %v, want B (pid %d)", unproven, b.pid)
		}
		if follow && len(unproven) != 0 {
			t.Errorf("with rescans Unproven = %v, want none", unproven)
		}
	}
}

func TestFollowEndsWhenTheRootExits(t *testing.T) {
	s := newSim(400)
	root := s.fork(s.procs[1], "root")
	rid, _ := s.Identity(root.pid)
	l := NewLineage(s, rid)
	steps := 0
	s.between = func() {
		if s.calls["Wait"] == 0 {
			return
		}
		steps++
		switch steps {
		case 1:
			c := s.fork(root, "c")
			s.fork(c, "d")
		case 3:
			s.exit(root)
		}
	}
	err := l.Follow(s, time.Millisecond, func() bool { return steps > 50 })
	if err != nil || steps > 50 {
		t.Fatalf("Follow = %v after %d steps, want it to end at the root's exit", err, steps)
	}
	if n := len(l.Members()); n != 3 {
		t.Errorf("recorded %d members, want root, c and d", n)
	}
}

// TestPropertyNoSignalLeavesTheTree runs teardowns against random
// interleavings of fork, exec, exit, reap, process groups and foreign
// signals, with the allocator handing a just-reaped pid to the next fork in
// half the runs: no signal may ever reach an instance outside the claimed
// tree, or one the teardown did not record.
func TestPropertyNoSignalLeavesTheTree(t *testing.T) {
	runs := 400
	if testing.Short() {
		runs = 50
	}
	acted, reissued := 0, 0
	for seed := range runs {
		r := rand.New(rand.NewPCG(uint64(seed), 15))
		s := newSim(100 + int32(20+r.IntN(60))) // small pid space: wraps
		s.adversarial = seed%2 == 0
		launchd := s.procs[1]
		self := s.fork(launchd, "supervisor")
		root := s.fork(launchd, "root")
		if seed%3 == 0 { // a user's teardown: other uids' processes answer flavor 17 and refuse signals
			s.caller, self.uid, root.uid = 501, 501, 501
		}
		for range r.IntN(6) {
			randomOp(r, s, root.uniq, self)
		}
		if s.live(root.pid) == nil || s.procs[root.pid] != root {
			continue
		}
		claim := claimOf(t, s, root)
		for range r.IntN(10) {
			randomOp(r, s, root.uniq, self)
		}
		s.between = func() {
			if r.IntN(3) == 0 {
				randomOp(r, s, root.uniq, self)
			}
		}
		pid := root.pid
		if r.IntN(4) == 0 { // a claim checked against a pid that may be another's
			pid = int32(100 + r.IntN(int(s.pidMax-100)))
		}
		out := Teardown(context.Background(), s, s, simBoot, pid, claim,
			Options{Self: self.pid, Now: s.now, Grace: 300 * time.Millisecond, KillWait: 200 * time.Millisecond, Step: 50 * time.Millisecond})
		for _, d := range s.delivered {
			if d.uniq == self.uniq || d.uniq <= 1 {
				t.Fatalf("seed %d: %v reached a protected instance %d", seed, d.sig, d.uniq)
			}
		}
		checkDeliveries(t, s, root.uniq, out.Targeted)
		if pid != root.pid && out.Verdict.Result == verdict.Owned {
			t.Fatalf("seed %d: pid %d judged OWNED for root %d", seed, pid, root.pid)
		}
		if len(s.delivered) > 0 {
			acted++
		}
		for _, m := range out.Targeted {
			if p := s.procs[m.Pid]; p != nil && p.uniq != m.Token.Uniq {
				reissued++ // a member's pid now names another instance
				break
			}
		}
	}
	t.Logf("%d runs: %d signalled a tree, %d ended with a member's pid reissued", runs, acted, reissued)
	if acted < runs/4 || reissued == 0 {
		t.Errorf("the property ran nearly empty: %d of %d runs acted, %d reissued a member's pid", acted, runs, reissued)
	}
}

// randomOp applies one adversarial move: fork, exec, exit, reap, setpgid or
// a signal from someone else, to a random process (tree or not).
func randomOp(r *rand.Rand, s *sim, root uint64, self *simProc) {
	var live, zombies []*simProc
	for _, p := range s.procs {
		switch {
		case p.pid <= 1 || p == self:
		case p.zombie:
			zombies = append(zombies, p)
		default:
			live = append(live, p)
		}
	}
	// map iteration order is random; sort for reproducible seeds
	sortProcs(live)
	sortProcs(zombies)
	free := s.free()
	switch op := r.IntN(7); {
	case op == 0 && len(zombies) > 0:
		z := zombies[r.IntN(len(zombies))]
		s.reap(z)
		if s.adversarial && free > 2 { // the reaped pid goes to a stranger
			s.fork(s.procs[1], "stranger")
		}
	case op <= 2 && free > 4:
		parent := s.procs[1]
		if len(live) > 0 {
			parent = live[r.IntN(len(live))]
		}
		s.fork(parent, "p")
	case op == 3 && len(live) > 0:
		s.exec(live[r.IntN(len(live))], "x")
	case op == 4 && len(live) > 0:
		s.exit(live[r.IntN(len(live))])
	case op == 5 && len(live) > 0:
		p := live[r.IntN(len(live))]
		if r.IntN(2) == 0 {
			s.setpgid(p)
		} else {
			p.uid ^= 501 // a setuid program
		}
	case op == 6 && len(live) > 0:
		s.deliver(live[r.IntN(len(live))], []unix.Signal{unix.SIGSTOP, unix.SIGCONT, unix.SIGTERM}[r.IntN(3)])
	}
}

func sortProcs(ps []*simProc) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].uniq < ps[j-1].uniq; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
