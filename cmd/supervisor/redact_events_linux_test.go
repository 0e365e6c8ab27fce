package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationRedactLocalEvents runs `events --json` on each kernel
// mechanism with --redact-args, and a real shell with a secret in its
// argv that runs a child: the secret is on no line, and the exec lines of
// the shell and of its child (its argv and, as the parent, the shell's)
// show where it was hidden and say so.
func TestIntegrationRedactLocalEvents(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, errb := &lockedBuffer{}, &lockedBuffer{}
			done := make(chan int, 1)
			go func() {
				done <- runMain(ctx, &cliEnv{stdout: out, stderr: errb}, []string{"events", "--json", "--mechanism", mech,
					"--redact-args", "--password=*", "--redact-args", "-p *"})
			}()
			testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(errb.String(), "mechanism "+mech) },
				"events never started: %s", errb)
			marker := fmt.Sprintf("redact-events-%d-%d", os.Getpid(), time.Now().UnixNano())
			// The shell runs a child shell with the same arguments; both
			// wait a little before they exit: netlink reads an exec's argv
			// from /proc.
			script := `/bin/sh -c "sleep 0.5" "$0" "$@"; sleep 0.5`
			sh := exec.Command("/bin/sh", "-c", script, marker, "--password=hunter2", "-p", "hunter2", "--user=alice")
			if b, err := sh.CombinedOutput(); err != nil {
				t.Fatalf("sh: %v: %s", err, b)
			}
			argv := func(v any) []string {
				var s []string
				l, _ := v.([]any)
				for _, a := range l {
					s = append(s, fmt.Sprint(a))
				}
				return s
			}
			var shExec, childExec map[string]any
			testenv.Eventually(t, 30*time.Second, func() bool {
				shExec, childExec = nil, nil
				sc := bufio.NewScanner(strings.NewReader(out.String()))
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					l := sc.Text()
					if !strings.Contains(l, marker) || !strings.Contains(l, `"kind":"exec"`) {
						continue
					}
					var m map[string]any
					if json.Unmarshal([]byte(l), &m) != nil {
						continue
					}
					if a := argv(m["argv"]); len(a) > 3 && a[3] == marker {
						switch a[2] {
						case script:
							shExec = m
						case "sleep 0.5":
							childExec = m
						}
					}
				}
				return shExec != nil && childExec != nil
			}, "no exec lines of the shell and its child in:\n%s", out)
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("events exited %d: %s", code, errb)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("events did not stop: %s", errb)
			}
			if strings.Contains(out.String(), "hunter2") {
				t.Errorf("the secret is in the output:\n%s", out)
			}
			shArgv := argv(shExec["argv"])
			want := []string{"/bin/sh", "-c", script, marker, "--password=[REDACTED]", "-p", "[REDACTED]", "--user=alice"}
			if fmt.Sprint(shArgv) != fmt.Sprint(want) {
				t.Errorf("shell argv %q, want %q", shArgv, want)
			}
			if shExec["args_redacted"] != true || childExec["args_redacted"] != true {
				t.Errorf("args_redacted: shell %v, child %v; want true for both", shExec["args_redacted"], childExec["args_redacted"])
			}
			childArgv := argv(childExec["argv"])
			want[2] = "sleep 0.5"
			if fmt.Sprint(childArgv) != fmt.Sprint(want) {
				t.Errorf("child argv %q, want %q", childArgv, want)
			}
		})
	}
}

// TestIntegrationRedactEventsStreamRefused: with the daemon's stream,
// --redact-args is a usage error and prints nothing: its lines are the
// daemon's, redacted by the daemon's patterns only, and the flag must not
// look as if it had hidden anything.
func TestIntegrationRedactEventsStreamRefused(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	startDaemon(t, state, sock, "--mechanism", "ebpf")
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := runMain(ctx, &cliEnv{stdout: out, stderr: errb}, []string{"events", "--socket", sock, "--redact-args", "--password=*"})
	if code != exitUsage {
		t.Errorf("events --redact-args with the daemon's stream exited %d, want %d: %s", code, exitUsage, errb)
	}
	if !strings.Contains(errb.String(), "--mechanism") {
		t.Errorf("stderr %q does not say how to apply the patterns", errb)
	}
	if out.String() != "" {
		t.Errorf("printed %q, want nothing", out)
	}
}
