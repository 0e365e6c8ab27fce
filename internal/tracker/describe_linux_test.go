package tracker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/execcache"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// seen is an event as OnEvent saw it, its parent's description copied.
type seen struct {
	kind               events.Kind
	pid, ppid          int32
	tok, ptok          token.Token
	argv               []string
	parentExe          string
	parentArgv         []string
	parentName         string
	parentUID          uint32
	parentDesc, parCtx bool
}

// recorder keeps the events OnEvent sees that concern pid (itself or as
// parent) or carry marker in their arguments or their parent's.
type recorder struct {
	marker string
	pid    atomic.Int32
	lost   atomic.Int64 // Lost events seen: each clears the exec cache
	mu     sync.Mutex
	evs    []seen
}

func (r *recorder) onEvent(ev *events.Event) {
	if ev.Kind == events.Lost {
		r.lost.Add(1)
	}
	has := func(argv []string) bool {
		return slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, r.marker) })
	}
	p := r.pid.Load()
	if !(p != 0 && (ev.Pid == p || ev.PPid == p) || ev.PPid == int32(os.Getpid()) || has(ev.Argv) || ev.Parent != nil && has(ev.Parent.Argv)) {
		return
	}
	c := ev.Clone() // kept: an event's strings live until the next one
	ev = &c
	s := seen{kind: ev.Kind, pid: ev.Pid, ppid: ev.PPid, tok: ev.Token, ptok: ev.ParentToken, argv: ev.Argv}
	if d := ev.Parent; d != nil {
		s.parentDesc, s.parentExe, s.parentArgv, s.parentName = true, d.Exe, d.Argv, string(d.Comm[:clen(d.Comm[:])])
		s.parCtx, s.parentUID = d.Ctx.Valid, d.Ctx.EUID
	}
	r.mu.Lock()
	r.evs = append(r.evs, s)
	r.mu.Unlock()
}

func clen(b []byte) int {
	if i := slices.Index(b, 0); i >= 0 {
		return i
	}
	return len(b)
}

// find returns the first recorded event f accepts.
func (r *recorder) find(f func(s *seen) bool) (seen, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.evs {
		if f(&r.evs[i]) {
			return r.evs[i], true
		}
	}
	return seen{}, false
}

func (r *recorder) all() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// TestIntegrationParentDescribed runs a parent P whose argv holds a
// secret, has it exec a child, kills it and forces its pid onto a new
// process B (clone3 set_tid) that execs a shell which forks a child too.
// P's children are described with P's exec; B's with B's, never P's; and
// afterwards the cache knows nothing under P's token while it still
// knows B.
func TestIntegrationParentDescribed(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) { testParentDescribed(t, mech) })
	}
}

// testParentDescribed is TestIntegrationParentDescribed with mech; the
// children live a moment, so that netlink's context read from /proc
// finds them.
func testParentDescribed(t *testing.T, mech string) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cache := execcache.New(execcache.Config{})
	rec := &recorder{marker: "execcache-test"}
	tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, Execs: cache, OnEvent: rec.onEvent,
		ExecContext: func() bool { return true }})
	if err != nil {
		testenv.Skip(t, "mechanism %s: %v", mech, err)
	}
	defer tr.Close()

	for attempt := 0; attempt < 20; attempt++ {
		// A loss (netlink reports one when /proc cannot tell whether a
		// thread's exit ended its process, which other work on the
		// machine can cause) clears the exec cache, rightly: what it
		// described may be stale. An attempt that saw one is run again.
		lost0 := rec.lost.Load()
		lostSince := func() bool { return rec.lost.Load() != lost0 }
		secret := fmt.Sprintf("execcache-test-P-secret-%d-%d", os.Getpid(), attempt)
		p := exec.Command("/bin/sh", "-c", "read x; /bin/sh -c 'read z' execcache-test-child-of-P; read y", "sh", secret)
		in, err := p.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		pid := int32(p.Process.Pid)
		rec.pid.Store(pid)
		oldTok := tokenOf(t, boot, pid)
		shell, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(in, "\n")
		defer io.WriteString(in, "\n\n")
		var child seen
		testenv.Eventually(t, 10*time.Second, func() bool {
			var ok bool
			child, ok = rec.find(func(s *seen) bool {
				return s.kind == events.Exec && s.ppid == pid && slices.Contains(s.argv, "execcache-test-child-of-P")
			})
			return ok
		}, "never: the exec of P's child")
		if !child.parentDesc || child.parentExe != shell || !slices.Contains(child.parentArgv, secret) || child.ptok != oldTok ||
			!child.parCtx || child.parentUID != 0 || child.parentName != "sh" {
			if lostSince() {
				t.Logf("attempt %d: a loss cleared the cache before P's child was described: again", attempt)
				p.Process.Kill()
				p.Wait()
				continue
			}
			t.Fatalf("P's child: parent %+v, want P's exec (%s with %q, token %v)", child, shell, secret, oldTok)
		}
		// The test started before the tracker: its exec was not seen, and
		// P's fork names it by the comm the graph knows, nothing more; not
		// even that when its token lacks the pidfs inode (netlink's, from
		// the scan): the token cannot prove the graph's node the same.
		fork, ok := rec.find(func(s *seen) bool { return s.kind == events.Fork && s.pid == pid })
		comm, _ := os.ReadFile("/proc/self/comm")
		named := fork.parentDesc && fork.parentName == strings.TrimSpace(string(comm))
		if !ok || fork.parentExe != "" || fork.parentArgv != nil || fork.parCtx || named != (fork.ptok.Ino != 0) {
			t.Errorf("P's fork (seen %v): parent %+v, want only the name %q (when the token has an inode)", ok, fork, comm)
		}
		p.Process.Kill()
		p.Wait()

		b, err := testenv.SpawnAt(t, pid, "/bin/sh", "-c", "/bin/sh -c 'sleep 1' execcache-test-child-of-B; exec sleep 60", "sh", "execcache-test-B")
		if errors.Is(err, testenv.ErrPidTaken) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var bchild seen
		testenv.Eventually(t, 10*time.Second, func() bool {
			var ok bool
			bchild, ok = rec.find(func(s *seen) bool {
				return s.kind == events.Exec && s.ppid == pid && slices.Contains(s.argv, "execcache-test-child-of-B")
			})
			return ok
		}, "never: the exec of B's child")
		b.Stop()
		newTok := bchild.ptok
		if newTok == oldTok || newTok.IsZero() {
			if lostSince() {
				t.Logf("attempt %d: a loss left B unproven when its child exec'd: again", attempt)
				continue
			}
			var bevs []string
			for _, s := range rec.all() {
				if s.pid == pid && !s.tok.IsZero() && s.tok != oldTok {
					bevs = append(bevs, fmt.Sprintf("%v tok %v argv %q", s.kind, s.tok, s.argv))
				}
			}
			t.Fatalf("B's token %v, want another instance than P's %v; B's events: %v", newTok, oldTok, bevs)
		}
		if !bchild.parentDesc || !slices.Contains(bchild.parentArgv, "execcache-test-B") {
			if lostSince() {
				t.Logf("attempt %d: a loss cleared the cache before B's child was described: again", attempt)
				continue
			}
			// What the tracker delivered of B, to tell the causes apart.
			var bevs []string
			for _, s := range rec.all() {
				if s.pid == pid && s.tok == newTok {
					bevs = append(bevs, fmt.Sprintf("%v argv %q", s.kind, s.argv))
				}
			}
			t.Errorf("B's child: parent %+v, want B's exec; B's events: %v", bchild, bevs)
		}
		for _, s := range rec.all() {
			if s.parentDesc && slices.Contains(s.parentArgv, secret) && s.ptok != oldTok {
				t.Errorf("%v of %d: P's description lent to parent %d %v", s.kind, s.pid, s.ppid, s.ptok)
			}
			if s.ptok == newTok && s.parentDesc && slices.Contains(s.parentArgv, secret) {
				t.Errorf("%v of %d: B described with P's secret", s.kind, s.pid)
			}
		}
		if lostSince() {
			t.Logf("attempt %d: a loss cleared the cache: again", attempt)
			continue
		}
		tr.Close()
		for _, c := range []struct {
			tok  token.Token
			want string
		}{{oldTok, ""}, {newTok, "sleep 60"}} { // B exec'd sleep last
			ev := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: 1 << 22, Token: oldTok, PPid: pid, ParentToken: c.tok}
			ev.Token.Start++
			cache.Observe(&ev)
			got := ""
			if ev.Parent != nil {
				got = strings.Join(ev.Parent.Argv, " ")
			}
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("cache after the reissue, parent token %v: argv %q, want one holding %q", c.tok, got, c.want)
			}
		}
		return
	}
	t.Fatal("could not reissue a pid")
}

// TestIntegrationChildlessForgotten runs a process L that forks nothing and
// a process P that forks a child, lets both exit, and checks the exec
// cache: L's description is forgotten at its exit (nothing can name it as
// parent any more), P's is kept for its child.
func TestIntegrationChildlessForgotten(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) { testChildlessForgotten(t, mech) })
	}
}

func testChildlessForgotten(t *testing.T, mech string) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cache := execcache.New(execcache.Config{})
	rec := &recorder{marker: "execdrop-test"}
	tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, Execs: cache, OnEvent: rec.onEvent,
		ExecContext: func() bool { return true }})
	if err != nil {
		testenv.Skip(t, "mechanism %s: %v", mech, err)
	}
	defer tr.Close()

	// Each waits for a line on stdin, so that its token is read while it
	// lives; P's child outlives it.
	start := func(script, marker string) (*exec.Cmd, io.WriteCloser, io.Reader, int32, token.Token) {
		c := exec.Command("/bin/sh", "-c", script, "sh", marker)
		in, out := testenv.StartPiped(t, c)
		pid := int32(c.Process.Pid)
		tok := tokenOf(t, boot, pid)
		testenv.Eventually(t, 10*time.Second, func() bool {
			_, ok := rec.find(func(s *seen) bool { return s.kind == events.Exec && s.pid == pid && slices.Contains(s.argv, marker) })
			return ok
		}, "never: the exec of %s", marker)
		return c, in, out, pid, tok
	}
	lc, lin, _, lpid, ltok := start("read x", "execdrop-test-L")
	pc, pin, pout, ppid, ptok := start("sleep 30 & echo $!; read x", "execdrop-test-P")
	var childPid int
	if _, err := fmt.Fscan(pout, &childPid); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p, err := os.FindProcess(childPid); err == nil {
			p.Kill()
		}
	}()
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, ok := rec.find(func(s *seen) bool { return s.kind == events.Fork && s.ppid == ppid })
		return ok
	}, "never: the fork of P's child")
	lin.Close()
	pin.Close()
	lc.Wait()
	pc.Wait()
	for _, pid := range []int32{lpid, ppid} {
		testenv.Eventually(t, 10*time.Second, func() bool {
			_, ok := rec.find(func(s *seen) bool { return s.kind == events.Exit && s.pid == pid })
			return ok
		}, "never: the exit of %d", pid)
	}
	tr.Close()
	if st := cache.Stats(); st.Forgotten == 0 {
		t.Errorf("cache stats %+v: nothing forgotten", st)
	}
	for _, c := range []struct {
		pid    int32
		tok    token.Token
		marker string // "" when the description must be gone
	}{{lpid, ltok, ""}, {ppid, ptok, "execdrop-test-P"}} {
		ev := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: 1 << 22, Token: c.tok, PPid: c.pid, ParentToken: c.tok}
		ev.Token.Start++
		cache.Observe(&ev)
		kept := ev.Parent != nil && slices.Contains(ev.Parent.Argv, c.marker)
		if kept != (c.marker != "") || c.marker == "" && ev.Parent != nil {
			t.Errorf("after the exits, parent %d: described %+v, want kept %v", c.pid, ev.Parent, c.marker != "")
		}
	}
}
