package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationRedactArgs: a daemon with redact_args patterns, the eBPF
// mechanism and process events logged. A real shell run with
// --password=hunter2 and -p hunter2 in its argv, which runs a child: the
// secret appears nowhere in the log file, the daemon's stream (JSON and
// text) or the daemon's stderr, while the shell's exec line and its
// child's (as parent args) show where it was redacted and say so. A
// launch with the secret in its argv: its launch_requested line is
// redacted and marked too.
func TestIntegrationRedactArgs(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--mechanism", "ebpf", "--log-process-events",
		"--redact-args", "--password=*", "--redact-args", "-p *")
	js := startStream(t, d, nil, "--json")
	text := startStream(t, d, nil)

	var marker string
	var shLine, trueLine map[string]any
	logPath := filepath.Join(filepath.Dir(sock), "log.json")
	// A stream that fell behind under load reports a loss (a lost
	// record) instead of the events it dropped: the attempt is run again.
	for attempt := 1; ; attempt++ {
		marker = fmt.Sprintf("redact-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
		sh := exec.Command("/bin/sh", "-c", "/bin/true \"$0\"", marker, "--password=hunter2", "-p", "hunter2", "--user=alice")
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("sh: %v: %s", err, out)
		}
		shLine, trueLine = nil, nil
		seen := testenv.Poll(20*time.Second, func() bool {
			b, _ := os.ReadFile(logPath)
			for l := range strings.SplitSeq(string(b), "\n") {
				if !strings.Contains(l, `"`+marker+`"`) || !strings.Contains(l, `"process_exec"`) {
					continue
				}
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) != nil {
					continue
				}
				p, _ := m["process"].(map[string]any)
				switch p["name"] {
				case "sh":
					shLine = m
				case "true":
					trueLine = m
				}
			}
			return shLine != nil && trueLine != nil && strings.Contains(js.out.String(), `"argv":["/bin/true","`+marker+`"]`) &&
				strings.Contains(text.out.String(), "/bin/true "+marker)
		})
		if seen {
			break
		}
		if lost := strings.Contains(js.out.String(), `"kind":"lost"`) || strings.Contains(text.out.String(), "lost"); !lost || attempt == 3 {
			t.Fatalf("never: the exec lines of sh and true in %s and the streams (attempt %d)\nlog: %s\njson: %s\ntext: %s",
				logPath, attempt, readFile(logPath), js.out, text.out)
		}
		t.Logf("attempt %d: a stream lost events; again", attempt)
	}
	// A launch through the API: its launch_requested line, and the exec of
	// the workload the daemon starts.
	d.launch(t, "--owner", "root", "--", "/bin/sh", "-c", "exit 0", "sh", marker+"-launch", "--password=hunter2")
	testenv.Eventually(t, 20*time.Second, func() bool {
		log := readFile(logPath)
		return strings.Contains(log, `"launch_requested"`) && strings.Count(log, marker+"-launch") >= 2
	}, "never: the launch's request and exec lines in the log\n%s", readFile(logPath))
	if log := readFile(logPath); !strings.Contains(log, `"args_redacted":true,"claim"`) && !strings.Contains(log, `"args_redacted":true,"requester"`) {
		t.Errorf("the launch_requested line does not mark its redaction:\n%s", log)
	}

	p := shLine["process"].(map[string]any)
	wantArgs := []any{"/bin/sh", "-c", "/bin/true \"$0\"", marker, "--password=[REDACTED]", "-p", "[REDACTED]", "--user=alice"}
	if got, _ := p["args"].([]any); !slices.Equal(got, wantArgs) {
		t.Errorf("sh's process.args = %q, want %q", got, wantArgs)
	}
	if got := p["args_count"]; got != float64(len(wantArgs)) {
		t.Errorf("sh's process.args_count = %v, want %d (the real count)", got, len(wantArgs))
	}
	if s, _ := shLine["supervisor"].(map[string]any); s["args_redacted"] != true {
		t.Errorf("sh's line: supervisor = %v, want args_redacted true", s)
	}
	pp, _ := trueLine["process"].(map[string]any)["parent"].(map[string]any)
	if got, _ := pp["args"].([]any); !slices.Equal(got, wantArgs) {
		t.Errorf("true's process.parent.args = %q, want %q", got, wantArgs)
	}
	if got := pp["command_line"]; !strings.Contains(fmt.Sprint(got), "--password=[REDACTED] -p [REDACTED]") {
		t.Errorf("true's process.parent.command_line = %q, want the redacted arguments", got)
	}
	if s, _ := trueLine["supervisor"].(map[string]any); fmt.Sprint(s["parent"]) != "map[args_redacted:true]" {
		t.Errorf("true's line: supervisor = %v, want parent.args_redacted true", s)
	}
	if !strings.Contains(js.out.String(), `"args_redacted":true`) {
		t.Errorf("the JSON stream never marks a redaction:\n%s", js.out)
	}
	// true's exec in the stream names its parent, redacted.
	found := false
	for l := range strings.SplitSeq(js.out.String(), "\n") {
		if strings.Contains(l, `"kind":"exec"`) && strings.Contains(l, `"argv":["/bin/true","`+marker+`"]`) {
			found = strings.Contains(l, `"parent":{"comm":"sh","exe":"`) && strings.Contains(l, `"--password=[REDACTED]","-p","[REDACTED]"`)
			if !found {
				t.Errorf("true's exec in the stream: %s, want its parent described, redacted", l)
			}
		}
	}
	if !found {
		t.Errorf("no exec of true with its parent in the JSON stream:\n%s", js.out)
	}
	d.term() // its stderr is complete, and no longer written
	for what, s := range map[string]string{"the log file": readFile(logPath), "the JSON stream": js.out.String(),
		"the text stream": text.out.String(), "the daemon's stderr": d.stderr.String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s holds the secret:\n%s", what, s)
		}
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestIntegrationRedactCutArgs: an argument vector cut at argv_max inside
// a secret a pattern hides whole is redacted too (the last argument could
// be the start of a match): with --argv-max 64, the first bytes of an
// access key were in the feed and the stream before, as neither pattern
// matched the cut argument.
func TestIntegrationRedactCutArgs(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--mechanism", "ebpf", "--log-process-events", "--argv-max", "64",
		"--redact-args", "--key=????????????????????", "--redact-args", "AKIA????????????????")
	js := startStream(t, d, nil, "--json")
	logPath := filepath.Join(filepath.Dir(sock), "log.json")
	lines := map[string]string{}
	for i, secret := range []string{"--key=QWERTYUIOPASDFGHJKLZ", "AKIAQWERTYUIOPASDFGH"} {
		marker := fmt.Sprintf("rc%d-%d", i, time.Now().UnixNano()%1e9)
		// The bytes before the secret (NULs included) leave 8 of it
		// under the 64-byte bound.
		pad := strings.Repeat("p", 56-len("/bin/true")-len(marker)-3)
		argv := []string{"/bin/true", marker, pad, secret}
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 20*time.Second, func() bool {
			for l := range strings.SplitSeq(readFile(logPath), "\n") {
				if strings.Contains(l, `"process_exec"`) && strings.Contains(l, `"`+marker+`","`+pad+`",`) {
					lines[secret] = l
					return strings.Contains(js.out.String(), `"`+marker+`","`+pad+`",`)
				}
			}
			return false
		}, "never the exec line of %q in %s and the stream:\n%s", argv, logPath, readFile(logPath))
		for _, want := range []string{`"args_truncated":true`, `"args_redacted":true`, `"args_count":4`} {
			if !strings.Contains(lines[secret], want) {
				t.Errorf("%s: the exec line lacks %s: %s", secret, want, lines[secret])
			}
		}
	}
	d.term()
	for what, s := range map[string]string{"the log file": readFile(logPath), "the JSON stream": js.out.String()} {
		if strings.Contains(s, "QWERTY") {
			t.Errorf("%s holds the start of a secret:\n%s", what, s)
		}
	}
}

// TestIntegrationRedactProcMechanism: the polling mechanism reports a
// process it found between two polls as an inferred fork, with the
// arguments /proc shows. Those were logged and streamed unredacted: the
// patterns were applied to execs alone.
func TestIntegrationRedactProcMechanism(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--mechanism", "proc", "--log-process-events",
		"--redact-args", "--password=*", "--redact-args", "-p *")
	js := startStream(t, d, nil, "--json")
	marker := fmt.Sprintf("redact-proc-%d-%d", os.Getpid(), time.Now().UnixNano())
	sh := exec.Command("/bin/sh", "-c", "sleep 1000; exit 0", marker, "--password=hunter2", "-p", "hunter2")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	// The group: the sh's sleep, killed with the sh alone, ran on under
	// init after every CI run.
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); sh.Wait() })
	logPath := filepath.Join(filepath.Dir(sock), "log.json")
	// The sh waits for its sleep, whose arguments hold no secret: a line
	// that names the marker is the sh's.
	var line map[string]any
	testenv.Eventually(t, 20*time.Second, func() bool {
		for l := range strings.SplitSeq(readFile(logPath), "\n") {
			if strings.Contains(l, marker) && json.Unmarshal([]byte(l), &line) == nil {
				return true
			}
		}
		return false
	}, "no line of the proc mechanism names %s:\n%s", marker, readFile(logPath))
	d.term()
	for what, s := range map[string]string{"the log file": readFile(logPath), "the JSON stream": js.out.String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s holds the secret:\n%s", what, s)
		}
	}
	if !strings.Contains(readFile(logPath), "--password=[REDACTED]") {
		t.Errorf("no line shows the redacted argument:\n%s", readFile(logPath))
	}
}
