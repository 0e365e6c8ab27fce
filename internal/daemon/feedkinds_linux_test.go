package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/metrics"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestFeedCountsUnloggedKinds: the metrics count every event, whatever
// kinds the log feed writes.
func TestFeedCountsUnloggedKinds(t *testing.T) {
	out := &lockedBuf{}
	lg, err := logfeed.New(logfeed.Config{Writer: out, ProcessEvents: logfeed.Execs})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New("test", metrics.Options{})
	f := &feed{Logger: lg, m: m}
	for _, k := range []events.Kind{events.Fork, events.Exec, events.Exit, events.Fork} {
		f.Event(&events.Event{Kind: k, Pid: 4242, Mechanism: events.EBPF})
	}
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(out.lines(t)); n != 1 {
		t.Errorf("the feed wrote %d lines, want 1 (the exec)", n)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		metrics.EventsTotal + `{kind="fork",mechanism="ebpf"} 2`,
		metrics.EventsTotal + `{kind="exec",mechanism="ebpf"} 1`,
		metrics.EventsTotal + `{kind="exit",mechanism="ebpf"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, rec.Body)
		}
	}
}

func TestWantsExecContext(t *testing.T) {
	for _, tt := range []struct {
		kinds logfeed.Kinds
		want  bool
	}{
		{0, false},
		{logfeed.Exits, false},
		{logfeed.Execs, true},
		{logfeed.Forks, true}, // a poller's inferred fork carries context
		{logfeed.Forks | logfeed.Exits, true},
		{logfeed.Execs | logfeed.Exits, true},
		{logfeed.AllKinds, true},
	} {
		if got := wantsExecContext(tt.kinds); got != tt.want {
			t.Errorf("wantsExecContext(%v) = %v, want %v", tt.kinds, got, tt.want)
		}
	}
}

// TestIntegrationFeedKinds runs the daemon (Run, the eBPF mechanism, its
// feed to a file) with a choice of process event kinds, runs a child with
// a unique argument, then a second one as a barrier (its exec line comes
// after every line of the first child: one ring, one drain, one queue),
// and finds in the feed exactly the chosen kinds' lines for the child.
func TestIntegrationFeedKinds(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tt := range []struct {
		kinds logfeed.Kinds
		want  []string // the child's process lines, in order
	}{
		{logfeed.Execs, []string{logfeed.ActionProcessExec}},
		{logfeed.Forks | logfeed.Exits, []string{logfeed.ActionProcessStarted, logfeed.ActionProcessEnded}},
	} {
		t.Run(tt.kinds.String(), func(t *testing.T) {
			logPath, stop := runFeedDaemon(t, "ebpf", tt.kinds)

			marker := fmt.Sprintf("feedkinds-%d-%d", os.Getpid(), time.Now().UnixNano())
			pid := runChild(t, "/bin/true", marker)
			// The barrier: a process that execs (every kind chosen here
			// shows a fork or an exec of it) after the child exited.
			bpid := runChild(t, "/bin/true", marker+"-barrier")
			testenv.Eventually(t, 20*time.Second, func() bool {
				return len(processLines(t, logPath, bpid)) > 0
			}, "never a line of the barrier (pid %d) in %s:\n%s", bpid, logPath, readLog(logPath))
			stop()

			lines := processLines(t, logPath, pid)
			var got []string
			for _, l := range lines {
				got = append(got, l.action)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("process lines of the child (pid %d) = %q, want %q:\n%s", pid, got, tt.want, readLog(logPath))
			}
			for _, l := range lines {
				if l.action == logfeed.ActionProcessExec && !slices.Equal(l.args, []string{"/bin/true", marker}) {
					t.Errorf("the child's exec line has process.args %q, want %q", l.args, []string{"/bin/true", marker})
				}
			}
		})
	}
}

// TestIntegrationExitOnlyReadsNoContext: with netlink, the daemon reads a
// process's exec context from /proc only while its feed shows exec or
// fork lines. A shell, started under the daemon, runs a child: the
// child's exit line describes the shell as its parent with the shell's
// arguments (read from /proc at its exec) when forks are logged too, and
// without them when only exits are (nothing was read). The shell lives
// until its exec has been drained, so a read that was wanted cannot miss
// it.
func TestIntegrationExitOnlyReadsNoContext(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tt := range []struct {
		kinds      logfeed.Kinds
		parentArgs bool
	}{
		{logfeed.Exits, false},
		{logfeed.Forks | logfeed.Exits, true},
	} {
		t.Run(tt.kinds.String(), func(t *testing.T) {
			logPath, stop := runFeedDaemon(t, "netlink", tt.kinds)
			marker := fmt.Sprintf("feedkinds-%d-%d", os.Getpid(), time.Now().UnixNano())
			// The shell waits on its stdin until a barrier's exit line
			// is in the feed: its exec was drained (and, when wanted,
			// its context read) while it was alive.
			argv := []string{"/bin/sh", "-c", `read x; /bin/true "$0"; exit 0`, marker}
			sh := exec.Command(argv[0], argv[1:]...)
			gate, err := sh.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			shPid := sh.Process.Pid
			bpid := runChild(t, "/bin/true", marker+"-barrier")
			testenv.Eventually(t, 20*time.Second, func() bool {
				return len(processLines(t, logPath, bpid)) > 0
			}, "never a line of the barrier (pid %d) in %s:\n%s", bpid, logPath, readLog(logPath))
			gate.Close()
			if err := sh.Wait(); err != nil && !errors.Is(err, syscall.ECHILD) {
				t.Fatalf("%q: %v", argv, err)
			}
			// The shell's exit line comes after its child's.
			testenv.Eventually(t, 20*time.Second, func() bool {
				return slices.ContainsFunc(processLines(t, logPath, shPid), func(l procLine) bool { return l.action == logfeed.ActionProcessEnded })
			}, "never the shell's exit line (pid %d) in %s:\n%s", shPid, logPath, readLog(logPath))
			stop()
			var exit *procLine
			for _, l := range processLines(t, logPath, -shPid) {
				if l.action == logfeed.ActionProcessEnded {
					exit = &l
				}
			}
			if exit == nil {
				t.Fatalf("no exit line of the shell's child in %s:\n%s", logPath, readLog(logPath))
			}
			if got := exit.parentArgs != nil; got != tt.parentArgs {
				t.Errorf("the child's exit line: process.parent.args %q, want them shown %v", exit.parentArgs, tt.parentArgs)
			}
			if tt.parentArgs && !slices.Equal(exit.parentArgs, argv) {
				t.Errorf("the child's exit line: process.parent.args %q, want %q", exit.parentArgs, argv)
			}
		})
	}
}

// runChild runs argv to its end and returns its pid. The daemon running
// in this process reaps every zombie child it has (waitChildren), so the
// child's own Wait may find it gone (ECHILD): it did end.
func runChild(t *testing.T, argv ...string) int {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	if err := c.Run(); err != nil && !errors.Is(err, syscall.ECHILD) {
		t.Fatalf("%q: %v", argv, err)
	}
	return c.Process.Pid
}

// runFeedDaemon runs the daemon (Run) with mechanism mech and its ECS
// feed, of process events of kinds, to a file, until the test ends or
// stop is called. It returns the feed's path. It skips (testenv.Skip)
// when the mechanism cannot run.
func runFeedDaemon(t *testing.T, mech string, kinds logfeed.Kinds) (logPath string, stop func()) {
	t.Helper()
	return runFeedDaemonWith(t, mech, kinds, nil)
}

// runFeedDaemonWith is runFeedDaemon with the config changed by set first.
func runFeedDaemonWith(t *testing.T, mech string, kinds logfeed.Kinds, set func(*Config)) (logPath string, stop func()) {
	t.Helper()
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(base, "log.json")
	cfg := DefaultConfig()
	cfg.StateDir = filepath.Join(base, "state")
	cfg.Socket = filepath.Join(base, "run", "api.sock")
	cfg.Mechanism = mech
	cfg.Cgroup = "off"
	cfg.LogOutput = "file:" + logPath
	cfg.LogProcessEvents = kinds
	if set != nil {
		set(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan Info, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, func(i Info) { served <- i }) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v after cancel", err)
		}
	}
	select {
	case i := <-served:
		t.Cleanup(stop)
		if i.Mechanism != mech {
			stop()
			t.Fatalf("the daemon runs %s, want %s", i.Mechanism, mech)
		}
	case err := <-done:
		cancel()
		if errors.Is(err, ErrMechanism) {
			testenv.Skip(t, "no %s: %v", mech, err)
		}
		t.Fatalf("Run = %v before serving", err)
	}
	return logPath, stop
}

type procLine struct {
	action     string
	args       []string
	parentPid  int
	parentArgs []string
}

// feedLine is what the tests read of an ECS process line.
type feedLine struct {
	Event struct {
		Action string `json:"action"`
	} `json:"event"`
	Process struct {
		Pid    int      `json:"pid"`
		Args   []string `json:"args"`
		Parent struct {
			Pid  int      `json:"pid"`
			Args []string `json:"args"`
		} `json:"parent"`
	} `json:"process"`
	Supervisor struct {
		Withheld bool `json:"args_withheld"`
		Parent   struct {
			Withheld bool `json:"args_withheld"`
		} `json:"parent"`
	} `json:"supervisor"`
}

// processLines returns the process lines (fork, exec, exit) of pid (of
// any child of -pid when pid is negative) in the ECS feed at path, in
// order. A last line without its newline (being written) is left out.
func processLines(t *testing.T, path string, pid int) []procLine {
	t.Helper()
	var out []procLine
	log := readLog(path)
	for l := range strings.SplitSeq(log[:strings.LastIndexByte(log, '\n')+1], "\n") {
		if l == "" {
			continue
		}
		var m feedLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		switch m.Event.Action {
		case logfeed.ActionProcessStarted, logfeed.ActionProcessExec, logfeed.ActionProcessEnded:
			if m.Process.Pid == pid || pid < 0 && m.Process.Parent.Pid == -pid {
				out = append(out, procLine{m.Event.Action, m.Process.Args, m.Process.Parent.Pid, m.Process.Parent.Args})
			}
		}
	}
	return out
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestIntegrationFeedArgsWhole: the feed writes as many argument bytes as
// the capture gave (the daemon's argv_max, 32 KiB by default), so an
// argument of 20,000 bytes, whole in the event, is whole in the exec line
// and not marked as cut. The line's own bound was once 8 KiB whatever
// argv_max said. With netlink the arguments come from /proc while the
// shell lives; a run whose read missed them (the line has none) is
// repeated.
func TestIntegrationFeedArgsWhole(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			logPath, stop := runFeedDaemon(t, mech, logfeed.Execs)
			defer stop()
			long := strings.Repeat("z", 20000)
			for attempt := 1; ; attempt++ {
				marker := fmt.Sprintf("argswhole-%d-%d", os.Getpid(), time.Now().UnixNano())
				// Two commands: the shell forks sleep rather than
				// becoming it, and lives while /proc is read.
				argv := []string{"/bin/sh", "-c", "sleep 0.2; :", marker, long}
				pid := runChild(t, argv...)
				bpid := runChild(t, "/bin/true", marker+"-barrier")
				testenv.Eventually(t, 20*time.Second, func() bool {
					return len(processLines(t, logPath, bpid)) > 0
				}, "never a line of the barrier (pid %d)", bpid)
				lines := processLines(t, logPath, pid)
				if len(lines) != 1 {
					t.Fatalf("%d exec lines of the shell (pid %d), want 1", len(lines), pid)
				}
				if len(lines[0].args) == 0 && mech == "netlink" && attempt < 3 {
					t.Logf("attempt %d: /proc was not read in time; again", attempt)
					continue
				}
				if !slices.Equal(lines[0].args, argv) {
					t.Fatalf("process.args has %d arguments of %d bytes in all, want %d of %d",
						len(lines[0].args), argsBytes(lines[0].args), len(argv), argsBytes(argv))
				}
				if line := execLine(t, logPath, pid); strings.Contains(line, `"args_truncated"`) {
					t.Errorf("the whole arguments are marked as cut: %.300s", line)
				}
				return
			}
		})
	}
}

func argsBytes(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	return n
}

// execLine returns the raw exec line of pid in the feed at path.
func execLine(t *testing.T, path string, pid int) string {
	t.Helper()
	needle := fmt.Sprintf(`"action":%q`, logfeed.ActionProcessExec)
	for l := range strings.SplitSeq(readLog(path), "\n") {
		if strings.Contains(l, needle) && strings.Contains(l, fmt.Sprintf(`"process":{"pid":%d,`, pid)) {
			return l
		}
	}
	t.Fatalf("no exec line of pid %d", pid)
	return ""
}
