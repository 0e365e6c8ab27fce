package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationFeedUserShare: one user's shell, run under a 32 KiB
// argument, forks /bin/true 60 times; each fork line carries that
// argument twice (the child runs the shell's image, the parent is the
// shell), and each exit line, which carries no ids, the shell's as the
// parent's. Past the user's share (log_user_bytes, 100 KB a second here)
// its lines keep only the first KiB of each command line, marked, still
// written, every one; its exits are charged to it (the uid the exec cache
// knew). Another user's shell, run with 4 KiB of arguments meanwhile, and
// root's, keep theirs whole.
func TestIntegrationFeedUserShare(t *testing.T) {
	testenv.RequireRoot(t)
	const forks = 60
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			logPath, stop := runFeedDaemonWith(t, mech, logfeed.AllKinds, func(c *Config) { c.LogUserBytes = 100_000 })
			defer stop()
			marker := fmt.Sprintf("share-%d-%d", os.Getpid(), time.Now().UnixNano())
			run := func(uid uint32, argv ...string) int {
				c := exec.Command(argv[0], argv[1:]...)
				c.Dir = "/"
				c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
				// ECHILD: the daemon, in this process, reaped it first
				// (as runChild allows).
				if err := c.Run(); err != nil && !errors.Is(err, syscall.ECHILD) {
					t.Fatalf("%.60q as uid %d: %v", argv, uid, err)
				}
				return c.Process.Pid
			}
			const storm, other = 64011, 64012
			heavy := run(storm, "/bin/sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done; sleep 0.1", forks),
				marker+"-storm", strings.Repeat("z", 32<<10))
			light := run(other, "/bin/sh", "-c", "sleep 0.1; :", marker+"-other", strings.Repeat("y", 4<<10))
			rooted := run(0, "/bin/sh", "-c", "sleep 0.1; :", marker+"-root", strings.Repeat("x", 4<<10))
			bpid := runChild(t, "/bin/true", marker+"-barrier")
			testenv.Eventually(t, 20*time.Second, func() bool {
				return len(processLines(t, logPath, bpid)) > 0
			}, "never a line of the barrier (pid %d)", bpid)

			var forkLines, exitLines, withheld, exitsWithheld int
			for l := range strings.SplitSeq(readLog(logPath), "\n") {
				if l == "" {
					continue
				}
				var m feedLine
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("log line %.200q: %v", l, err)
				}
				if m.Process.Parent.Pid != heavy {
					continue
				}
				w := m.Supervisor.Withheld || m.Supervisor.Parent.Withheld
				switch m.Event.Action {
				case logfeed.ActionProcessStarted:
					forkLines++
				case logfeed.ActionProcessEnded:
					exitLines++
					if m.Supervisor.Parent.Withheld {
						exitsWithheld++
					}
				}
				if w {
					withheld++
					if argsBytes(m.Process.Args) > 1024 || argsBytes(m.Process.Parent.Args) > 1024 {
						t.Errorf("a line marked withheld has more than the first KiB of arguments: %.300s", l)
					}
					if len(m.Process.Parent.Args) == 0 || !strings.HasPrefix(m.Process.Parent.Args[len(m.Process.Parent.Args)-1], "zzz") {
						t.Errorf("a line marked withheld lost the head of its parent's arguments: %.300s", l)
					}
				}
			}
			t.Logf("%s: the storm user's shell: %d fork lines, %d exit lines of its children, %d lines withheld (%d exits)", mech, forkLines, exitLines, withheld, exitsWithheld)
			if forkLines < forks {
				t.Errorf("%d fork lines of the shell's children, want %d: every line is written", forkLines, forks)
			}
			if withheld < forks/2 {
				t.Errorf("%d of the storm user's lines withheld their arguments, want most of its %d children's", withheld, forks)
			}
			if exitsWithheld == 0 {
				t.Errorf("no exit line of the storm user's children withheld its parent's arguments: exits are not charged to their user")
			}
			for _, c := range []struct {
				pid  int
				what string
			}{{light, "the other user's shell"}, {rooted, "root's shell"}} {
				line := execLine(t, logPath, c.pid)
				if strings.Contains(line, `"args_withheld"`) || !strings.Contains(line, marker) {
					t.Errorf("%s (pid %d): arguments withheld or missing: %.300s", c.what, c.pid, line)
				}
			}
		})
	}
}
