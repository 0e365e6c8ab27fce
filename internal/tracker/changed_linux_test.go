package tracker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationChangedAfterExecNotReported: with netlink, a process
// (python3, run as root from /) that changes what it is right after its
// exec, before the tracker reads /proc for the exec event, must not have
// the change reported as what it was at the exec. The tracker is held on
// an earlier event until the change is made, so the read always comes
// after it. Ids and session (the kernel reports their changes) are
// absent or the exec's; the name is absent or the exec's. A chdir, which
// the kernel does not report, is what /proc shows at the read: the test
// records that limit (see procctx).
func TestIntegrationChangedAfterExecNotReported(t *testing.T) {
	// The interpreter itself, not a wrapper that execs it (pyenv).
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		testenv.Skip(t, "no python3 to change its own ids after exec: %v", err)
	}
	python := strings.TrimSpace(string(out))
	g := startGated(t)
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name, code string
		// noise: the test runs 100 short processes between the exec
		// and the change, so that the change's message is queued
		// further behind the exec than the source looks ahead.
		noise bool
		check func(t *testing.T, ev *events.Event)
	}{
		{"setuid", "os.setuid(65534)", false, func(t *testing.T, ev *events.Event) {
			if ev.Ctx.Has(events.CtxIDs) {
				t.Errorf("uid %d euid %d reported for an exec by root: %+v", ev.Ctx.UID, ev.Ctx.EUID, ev)
			}
			wantKept(t, &ev.Ctx, events.CtxSession, sid)
		}},
		{"setgid", "os.setgid(65534)", false, func(t *testing.T, ev *events.Event) {
			if ev.Ctx.Has(events.CtxIDs) {
				t.Errorf("gid %d egid %d reported for an exec by root", ev.Ctx.GID, ev.Ctx.EGID)
			}
			wantKept(t, &ev.Ctx, events.CtxSession, sid)
		}},
		{"setsid", "os.setsid()", false, func(t *testing.T, ev *events.Event) {
			if ev.Ctx.Has(events.CtxSession) {
				t.Errorf("session %d reported, want none (the test's was %d)", ev.Ctx.SID, sid)
			}
			wantKept(t, &ev.Ctx, events.CtxIDs, sid)
			if ev.Ctx.Has(events.CtxIDs) && (ev.Ctx.UID != 0 || ev.Ctx.EUID != 0) {
				t.Errorf("uid %d euid %d reported for an exec by root", ev.Ctx.UID, ev.Ctx.EUID)
			}
		}},
		{"rename", "import ctypes; ctypes.CDLL(None).prctl(15, b'renamed-after')", false, func(t *testing.T, ev *events.Event) {
			c := ev.CommString()
			if c != "" && c != "python3" {
				t.Errorf("name %q reported, want python3 or none", c)
			}
			if c == "" && ev.Ctx.Has(events.CtxName) {
				t.Errorf("the name was dropped and the context does not say so (context_absent %v)", ev.Ctx.Absent)
			}
		}},
		{"setuid behind the look-ahead", "os.setuid(65534)", true, func(t *testing.T, ev *events.Event) {
			if ev.Ctx.Valid && (ev.Ctx.UID != 0 || ev.Ctx.EUID != 0) {
				t.Errorf("uid %d euid %d reported for an exec by root", ev.Ctx.UID, ev.Ctx.EUID)
			}
		}},
		{"chdir", "os.chdir('/tmp')", false, func(t *testing.T, ev *events.Event) {
			t.Logf("working directory %q (a chdir is not reported by the kernel: as read)", ev.Exec.Cwd)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// run makes one attempt: the exec event, and whether it was
			// described (what the source could not prove it drops, all
			// of it when it could not see the whole queue: a busy host).
			run := func(attempt int) (events.Event, bool) {
				marker := fmt.Sprintf("changed-after-exec-%d-%d-%d", os.Getpid(), i, attempt)
				release := g.hold(t, marker+"-gate")
				code := "import os, sys\n" + tc.code + "\nprint('ready', flush=True)\nsys.stdin.read()"
				if tc.noise {
					code = "import os, sys\nsys.stdin.readline()\n" + code
				}
				var now unix.Timespec
				if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &now); err != nil {
					t.Fatal(err)
				}
				since := uint64(now.Nano())
				c := exec.Command(python, "-c", code, marker)
				c.Dir = "/"
				in, out := testenv.StartPiped(t, c)
				defer func() { in.Close(); c.Wait() }()
				if tc.noise {
					for range 100 {
						if err := exec.Command("/bin/true").Run(); err != nil {
							t.Fatal(err)
						}
					}
					in.Write([]byte("\n"))
				}
				line, err := bufio.NewReader(out).ReadString('\n')
				release()
				if err != nil {
					t.Fatalf("python3: %q %v", line, err)
				}
				pid := int32(c.Process.Pid)
				var ev events.Event
				testenv.Eventually(t, 10*time.Second, func() bool {
					var ok bool
					ev, ok = g.find(func(e *events.Event) bool {
						return e.Kind == events.Exec && e.Pid == pid && e.Time >= since && (slices.Contains(e.Argv, marker) || e.Exe == "")
					})
					return ok
				}, "no exec of python3 (pid %d)", pid)
				return ev, ev.Exe != ""
			}
			// While other tests fork storms (CI runs packages side by
			// side), the look-ahead can miss the end of the queue many
			// times in a row: attempts go on for a minute.
			deadline := time.Now().Add(time.Minute)
			attempt := 0
			for ; attempt < 10 || time.Now().Before(deadline); attempt++ {
				ev, described := run(attempt)
				if described || tc.noise {
					tc.check(t, &ev)
					return
				}
				t.Logf("attempt %d: the exec was not described (a busy host): again", attempt)
			}
			t.Fatalf("%d attempts in a minute: the exec was never described", attempt)
		})
	}
}

// TestIntegrationExecParentAtExec: with netlink, a process whose parent
// exits after the process's exec and before the tracker reads /proc for
// it (held on an earlier event meanwhile) shows its adopter as parent at
// the read. Its exec event must name the parent it had when it exec'd.
func TestIntegrationExecParentAtExec(t *testing.T) {
	g := startGated(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	// A busy host can leave the exec unproven many times in a row:
	// attempts go on for a minute.
	deadline := time.Now().Add(time.Minute)
	attempt := 0
	for ; attempt < 10 || time.Now().Before(deadline); attempt++ {
		marker := fmt.Sprintf("exec-parent-%d-%d", os.Getpid(), attempt)
		dir := t.TempDir()
		fifo, done := filepath.Join(dir, "go"), filepath.Join(dir, "done")
		for _, f := range []string{fifo, done} {
			if err := unix.Mkfifo(f, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// The parent forks a child that waits on the fifo, then execs a
		// program that says so (the kernel sent the exec's message before
		// the program ran).
		par := exec.Command("/bin/sh", "-c", "( read x < "+fifo+"; exec /bin/sh -c 'echo > "+done+"; sleep 30' "+marker+" ) & echo $!; read y")
		pin, pout := testenv.StartPiped(t, par)
		parent := int32(par.Process.Pid)
		ptok := tokenOf(t, boot, parent)
		var pid int32
		if _, err := fmt.Fscan(pout, &pid); err != nil {
			t.Fatal(err)
		}
		defer unix.Kill(int(pid), unix.SIGKILL)
		// The child's fork is read while its parent lives.
		testenv.Eventually(t, 10*time.Second, func() bool {
			_, ok := g.find(func(e *events.Event) bool { return e.Kind == events.Fork && e.Pid == pid })
			return ok
		}, "never: the fork of %d", pid)
		release := g.hold(t, marker+"-gate")
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString("\n")
		w.Close()
		if _, err := os.ReadFile(done); err != nil {
			t.Fatal(err)
		}
		pin.Close()
		par.Wait()
		var st procfs.Stat
		testenv.Eventually(t, 10*time.Second, func() bool {
			return procfs.NewReader("/proc").ReadStat(pid, &st) == nil && st.PPid != parent
		}, "never: %d adopted", pid)
		release()
		var ev events.Event
		testenv.Eventually(t, 10*time.Second, func() bool {
			var ok bool
			ev, ok = g.find(func(e *events.Event) bool { return e.Kind == events.Exec && e.Pid == pid })
			return ok
		}, "never: the exec event of %d", pid)
		if ev.Token.IsZero() {
			t.Logf("attempt %d: the exec of %d was not proven (a busy host): again", attempt, pid)
			continue
		}
		if ev.PPid != parent || ev.ParentToken != ptok {
			t.Errorf("exec of %d: parent %d %v, want %d %v (its adopter at the read is %d)", pid, ev.PPid, ev.ParentToken, parent, ptok, st.PPid)
		}
		return
	}
	t.Fatalf("%d attempts in a minute: the exec was never proven", attempt)
}

// gated is a netlink tracker the test can hold: it records every event,
// and its OnEvent waits at the exec of a process whose arguments hold the
// gate until released, so that what the test does meanwhile happens
// before the tracker reads any event queued behind.
type gated struct {
	tr *Tracker
	mu sync.Mutex
	// gate is the pid whose next fork holds the tracker (0: none). A fork
	// event always names its parent, from the kernel's message; an exec's
	// arguments are dropped on a busy host (the look-ahead could not see
	// the whole queue), and a gate matched on them never held.
	gate    int32
	held    chan struct{}
	release chan struct{}
	got     []events.Event
}

func startGated(t *testing.T) *gated {
	t.Helper()
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	g := &gated{held: make(chan struct{}, 1), release: make(chan struct{})}
	g.tr, err = Start(context.Background(), Options{Mechanism: "netlink", Boot: boot, ExecContext: func() bool { return true },
		OnEvent: g.onEvent})
	if err != nil {
		testenv.Skip(t, "mechanism netlink: %v", err)
	}
	t.Cleanup(func() { g.tr.Close() })
	return g
}

func (g *gated) onEvent(ev *events.Event) {
	g.mu.Lock()
	e := ev.Clone()
	e.Parent = nil
	g.got = append(g.got, e)
	hold := g.gate != 0 && ev.Kind == events.Fork && ev.PPid == g.gate
	if hold {
		g.gate = 0
	}
	g.mu.Unlock()
	if hold {
		g.held <- struct{}{}
		<-g.release
	}
}

// hold starts a shell that forks a child once told to, the child's fork
// holding the tracker, and returns once the tracker waits; the function
// it returns lets the tracker go on. gate names the shell in ps.
func (g *gated) hold(t *testing.T, gate string) (release func()) {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", "read go; (read x); :", gate)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.gate = int32(c.Process.Pid)
	g.mu.Unlock()
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.held:
	case <-time.After(time.Minute):
		g.mu.Lock()
		g.gate = 0 // no hold from now on
		g.mu.Unlock()
		select {
		case <-g.held: // it came after all: let the tracker go
			g.release <- struct{}{}
		default:
		}
		in.Close()
		c.Wait()
		t.Fatalf("the tracker never saw gate %d fork", c.Process.Pid)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			g.release <- struct{}{}
			in.Close()
			c.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

// find returns the first event recorded that f accepts.
func (g *gated) find(f func(e *events.Event) bool) (events.Event, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.got {
		if f(&g.got[i]) {
			return g.got[i], true
		}
	}
	return events.Event{}, false
}

// wantKept checks that the context of an exec whose process changed one
// part of it after the exec kept the rest: part, the cgroup and the pid
// namespace, with the test's session sid when part is the session.
func wantKept(t *testing.T, c *events.Context, part events.CtxPart, sid int) {
	t.Helper()
	if !c.Has(part) || c.CgroupID == 0 || c.PidNS == 0 || c.NSPid == 0 {
		t.Errorf("the rest of the context was not kept: %+v", *c)
	}
	if part == events.CtxSession && c.Has(part) && c.SID != int32(sid) {
		t.Errorf("session %d reported, want the test's %d", c.SID, sid)
	}
}
