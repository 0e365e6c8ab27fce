package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationEventsStream runs `events --json` against the real kernel
// with each kernel mechanism forced, starts a child, and checks its fork,
// exec and exit lines, then the totals printed when the stream stops.
func TestIntegrationEventsStream(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			out, errb := &lockedBuffer{}, &lockedBuffer{}
			done := make(chan int)
			go func() {
				done <- runMain(ctx, &cliEnv{stdout: out, stderr: errb}, []string{"events", "--json", "--mechanism", mech})
			}()
			// The stream names its mechanism once attached and scanned.
			testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(errb.String(), "mechanism "+mech) },
				"events never started: %s", errb)
			// The child lives until its fork line is out: netlink reads a
			// token from /proc, which a process already gone no longer
			// has (a load elsewhere can delay the read that long).
			child := exec.Command("/bin/sh", "-c", "read x; exit 7")
			stdin, err := child.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			pid := child.Process.Pid
			testenv.Eventually(t, 30*time.Second, func() bool {
				return strings.Contains(out.String(), fmt.Sprintf(`"kind":"fork","mechanism":"%s","pid":%d,`, mech, pid))
			}, "no fork line for child %d in:\n%s", pid, out)
			released := time.Now()
			stdin.Close()
			child.Wait()
			// The child's exit line comes last of its lines (for netlink,
			// after the reader's straggler poll).
			testenv.Eventually(t, 30*time.Second, func() bool { return printedExit(out.String(), pid) },
				"no exit line for child %d in:\n%s", pid, out)
			printed := time.Now()
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("events exited %d: %s", code, errb.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("events did not stop when cancelled: %s", errb.String())
			}
			kinds := map[string]map[string]any{}
			sc := bufio.NewScanner(strings.NewReader(out.String()))
			for sc.Scan() {
				var ev map[string]any
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
				}
				if ev["mechanism"] != mech {
					t.Errorf("line %q names mechanism %v", sc.Text(), ev["mechanism"])
				}
				if ev["pid"] == float64(pid) {
					kinds[ev["kind"].(string)] = ev
				}
			}
			fork, exit := kinds["fork"], kinds["exit"]
			if fork == nil || exit == nil {
				t.Fatalf("child %d: events %v, want fork and exit", pid, kinds)
			}
			if fork["token"] == nil || fork["ppid"] == nil || exit["exit_code"] != float64(7) {
				t.Errorf("fork %v exit %v: want a token, a parent and exit code 7", fork, exit)
			}
			// Each line says when its event happened: the fork after the
			// test started the child, the exit after it released it, both
			// before the exit line was seen. (The kernel's stamps are
			// converted with an offset of the wall clock sampled apart
			// from them: a millisecond of slack.)
			for _, c := range []struct {
				kind      string
				from, to  time.Time
				fromLabel string
			}{{"fork", started, printed, "the start"}, {"exit", released, printed, "the release"}} {
				at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(kinds[c.kind]["time"]))
				if err != nil {
					t.Errorf("%s line time %v: %v", c.kind, kinds[c.kind]["time"], err)
					continue
				}
				if at.Before(c.from.Add(-time.Millisecond)) || at.After(c.to) {
					t.Errorf("%s at %v, want after %s (%v) and before the line was seen (%v)", c.kind, at, c.fromLabel, c.from, c.to)
				}
			}
			// eBPF reports the file the kernel ran: /bin/sh resolved.
			sh, err := filepath.EvalSymlinks("/bin/sh")
			if err != nil {
				t.Fatal(err)
			}
			if ex := kinds["exec"]; mech == "ebpf" && (ex == nil || ex["exe"] != sh) {
				t.Errorf("exec = %v, want exe %s", ex, sh)
			}
			if !strings.Contains(errb.String(), " events, ") || !strings.Contains(errb.String(), " lost") {
				t.Errorf("stderr %q lacks the totals", errb.String())
			}
		})
	}
}

// printedExit reports whether the JSON lines hold the exit of pid.
func printedExit(lines string, pid int) bool {
	for _, l := range strings.Split(lines, "\n") {
		var ev struct {
			Kind string
			Pid  int
		}
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Kind == "exit" && ev.Pid == pid {
			return true
		}
	}
	return false
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIntegrationEventsStopsOnSIGINT runs three `events --mechanism
// netlink` processes at once (as the issue did), sends each a single
// SIGINT, and expects each to print its totals and exit 0: after a storm
// that the test ran and then no process event of its own (the stop must
// not wait for one), and during a storm. The deadline is generous; the
// time each took is logged, not asserted (scripts/forkstorm-netlink.sh
// measures it).
func TestIntegrationEventsStopsOnSIGINT(t *testing.T) {
	testenv.RequireRoot(t)
	bin := binary(t)
	for _, during := range []bool{false, true} {
		t.Run(fmt.Sprintf("during_storm=%v", during), func(t *testing.T) {
			type listener struct {
				cmd  *exec.Cmd
				errb *lockedBuffer
				done chan error
			}
			var ls []listener
			for range 3 {
				l := listener{cmd: exec.Command(bin, "events", "--json", "--mechanism", "netlink"), errb: &lockedBuffer{}, done: make(chan error, 1)}
				l.cmd.Stdout = io.Discard
				l.cmd.Stderr = l.errb
				if err := l.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() { l.done <- l.cmd.Wait() }()
				t.Cleanup(func() { l.cmd.Process.Kill() })
				ls = append(ls, l)
			}
			for _, l := range ls {
				testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(l.errb.String(), "mechanism netlink") },
					"events never started: %s", l.errb)
			}
			storm := exec.Command("sh", "-c", "i=0; while [ $i -lt 2000 ]; do (exit 0); i=$((i+1)); done")
			if err := storm.Start(); err != nil {
				t.Fatal(err)
			}
			if !during {
				storm.Wait()
			}
			for _, l := range ls {
				start := time.Now()
				l.cmd.Process.Signal(syscall.SIGINT)
				select {
				case err := <-l.done:
					if err != nil {
						t.Errorf("events after one SIGINT: %v: %s", err, l.errb)
					}
					t.Logf("stopped %v after SIGINT", time.Since(start))
				case <-time.After(30 * time.Second):
					t.Fatalf("events still running 30 s after one SIGINT: %s", l.errb)
				}
				if !strings.Contains(l.errb.String(), " events, ") {
					t.Errorf("stderr %q lacks the totals", l.errb)
				}
			}
			storm.Wait()
		})
	}
}
