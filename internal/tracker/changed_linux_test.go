package tracker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
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
	testenv.RequireRoot(t)
	// The interpreter itself, not a wrapper that execs it (pyenv).
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		testenv.Skip(t, "no python3 to change its own ids after exec: %v", err)
	}
	python := strings.TrimSpace(string(out))
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	gate, held, release := "", make(chan struct{}, 1), make(chan struct{})
	var got []events.Event
	tr, err := Start(context.Background(), Options{Mechanism: "netlink", Boot: boot, ExecContext: func() bool { return true },
		OnEvent: func(ev *events.Event) {
			if ev.Kind != events.Exec {
				return
			}
			mu.Lock()
			e := *ev
			e.Argv = slices.Clone(ev.Argv)
			got = append(got, e)
			hold := gate != "" && slices.Contains(ev.Argv, gate)
			mu.Unlock()
			if hold {
				held <- struct{}{}
				<-release
			}
		}})
	if err != nil {
		testenv.Skip(t, "mechanism netlink: %v", err)
	}
	defer tr.Close()
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
			if ev.Ctx.Valid && (ev.Ctx.UID != 0 || ev.Ctx.EUID != 0) {
				t.Errorf("uid %d euid %d reported for an exec by root: %+v", ev.Ctx.UID, ev.Ctx.EUID, ev)
			}
		}},
		{"setgid", "os.setgid(65534)", false, func(t *testing.T, ev *events.Event) {
			if ev.Ctx.Valid && (ev.Ctx.GID != 0 || ev.Ctx.EGID != 0) {
				t.Errorf("gid %d egid %d reported for an exec by root", ev.Ctx.GID, ev.Ctx.EGID)
			}
		}},
		{"setsid", "os.setsid()", false, func(t *testing.T, ev *events.Event) {
			if ev.Ctx.Valid && ev.Ctx.SID != int32(sid) {
				t.Errorf("session %d reported, want the test's %d", ev.Ctx.SID, sid)
			}
		}},
		{"rename", "import ctypes; ctypes.CDLL(None).prctl(15, b'renamed-after')", false, func(t *testing.T, ev *events.Event) {
			if c := ev.CommString(); c != "" && c != "python3" {
				t.Errorf("name %q reported, want python3 or none", c)
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
				mu.Lock()
				gate = marker + "-gate"
				mu.Unlock()
				g := exec.Command("/bin/sh", "-c", "read x", gate)
				gin, err := g.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { gin.Close(); g.Wait() }()
				<-held // the tracker waits in OnEvent from here
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
				in, err := c.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				out, err := c.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(); err != nil {
					release <- struct{}{}
					t.Fatal(err)
				}
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
				release <- struct{}{}
				if err != nil {
					t.Fatalf("python3: %q %v", line, err)
				}
				pid := int32(c.Process.Pid)
				var ev events.Event
				testenv.Eventually(t, 10*time.Second, func() bool {
					mu.Lock()
					defer mu.Unlock()
					for _, e := range got {
						if e.Pid == pid && e.Time >= since && (slices.Contains(e.Argv, marker) || e.Exe == "") {
							ev = e
							return true
						}
					}
					return false
				}, "no exec of python3 (pid %d)", pid)
				return ev, ev.Exe != ""
			}
			for attempt := 0; attempt < 10; attempt++ {
				ev, described := run(attempt)
				if described || tc.noise {
					tc.check(t, &ev)
					return
				}
				t.Logf("attempt %d: the exec was not described (a busy host): again", attempt)
			}
			t.Fatal("10 attempts: the exec was never described")
		})
	}
}
