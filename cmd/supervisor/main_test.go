package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

// cli runs the command line in process and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func tokenOf(t *testing.T, pid int) string {
	t.Helper()
	code, out, errs := cli(t, "token", strconv.Itoa(pid))
	if code != 0 {
		t.Fatalf("token %d: exit %d: %s", pid, code, errs)
	}
	return strings.TrimSpace(out)
}

func TestUsageAndHelp(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{nil, exitUsage, ""},
		{[]string{"--help"}, 0, "commands:"},
		{[]string{"verify", "--help"}, 0, "0 OWNED, 1 FOREIGN"},
		{[]string{"kill", "--help"}, 0, "--grace"},
		{[]string{"version"}, 0, "supervisor "},
		{[]string{"nonsense"}, exitUsage, ""},
		{[]string{"token"}, exitUsage, ""},
		{[]string{"token", "abc"}, exitUsage, ""},
		{[]string{"token", "0"}, exitUsage, ""},
		{[]string{"token", "99999999999"}, exitUsage, ""},
		{[]string{"verify", "1"}, exitUsage, ""},
		{[]string{"verify", "1", "not-a-token"}, exitData, ""},
		{[]string{"verify", "--bogus", "1", "x"}, exitUsage, ""},
		{[]string{"kill", "1", "v1:t:00000000000000000000000000000000:1:-", "--grace", "-1s"}, exitUsage, ""},
		// The daemon refuses a grace over api.MaxGrace: so does the CLI,
		// before it asks the daemon or tears anything down itself.
		{[]string{"kill", "1", "v1:t:00000000000000000000000000000000:1:-", "--grace", "2h"}, exitUsage, ""},
		// Each command checks how many arguments it got before it asks
		// the daemon or the kernel anything.
		{[]string{"launch", "--json", "--socket", "/nonexistent"}, exitUsage, ""},
		{[]string{"release", "--socket", "/nonexistent"}, exitUsage, ""},
		{[]string{"list", "x", "--socket", "/nonexistent"}, exitUsage, ""},
		{[]string{"tree", "1", "2", "--socket", "/nonexistent"}, exitUsage, ""},
		{[]string{"events", "x"}, exitUsage, ""},
		{[]string{"status", "--help"}, 0, "69 no daemon"},
	}
	for _, tt := range tests {
		code, out, _ := cli(t, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.out) {
			t.Errorf("supervisor %q = %d %q, want %d with %q", tt.args, code, out, tt.code, tt.out)
		}
	}
}

func TestIntegrationTokenVerifyKill(t *testing.T) {
	cmd := testenv.Start(t, "sleep", "60")
	pid := strconv.Itoa(cmd.Process.Pid)
	tok := tokenOf(t, cmd.Process.Pid)

	code, out, _ := cli(t, "verify", pid, tok, "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("verify --json printed %q: %v", out, err)
	}
	if code != 0 || v["verdict"] != "OWNED" || v["pid"] != float64(cmd.Process.Pid) || v["token"] != tok || v["reason"] == "" || v["mechanism"] == "" {
		t.Fatalf("verify --json = %d %v, want OWNED with pid, token, reason, mechanism", code, v)
	}
	if code, out, _ := cli(t, "verify", pid, tok); code != 0 || verdictWord(out) != "OWNED" {
		t.Errorf("verify = %d %q, want 0 OWNED", code, out)
	}
	code, out, _ = cli(t, "kill", pid, tok, "--grace", "2s", "--json")
	if code != 0 {
		t.Fatalf("kill = %d %s, want 0", code, out)
	}
	var o map[string]any
	if err := json.Unmarshal([]byte(out), &o); err != nil || o["dead"] != true {
		t.Fatalf("kill --json = %q (%v), want dead", out, err)
	}
	cmd.Wait()
	if code, out, _ := cli(t, "verify", pid, tok); code != 2 || verdictWord(out) != "GONE" {
		t.Errorf("verify after kill = %d %q, want 2 GONE", code, out)
	}
	if code, _, errs := cli(t, "token", pid); code < 64 || errs == "" {
		t.Errorf("token of a gone pid = %d %q, want >= 64 with a message", code, errs)
	}
	// A ticks-only claim cannot be proven on a kernel with pidfs.
	self := tokenOf(t, os.Getpid())
	coarse := self[:strings.LastIndexByte(self, ':')] + ":-"
	if code, _, _ := cli(t, "verify", strconv.Itoa(os.Getpid()), coarse); code != 3 {
		t.Errorf("verify with a ticks-only token = %d, want 3 UNVERIFIABLE", code)
	}
}

func TestIntegrationReissuedPidThroughCLI(t *testing.T) {
	testenv.RequireRoot(t)
	for attempt := 0; attempt < 20; attempt++ {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		tok := tokenOf(t, pid)
		cmd.Process.Kill()
		cmd.Wait()
		stranger, err := testenv.Reissue(t, int32(pid))
		if err != nil {
			continue
		}
		stok := tokenOf(t, pid)
		if code, out, _ := cli(t, "verify", strconv.Itoa(pid), tok); code != 1 || verdictWord(out) != "FOREIGN" {
			t.Errorf("verify(reissued) = %d %q, want 1 FOREIGN", code, out)
		}
		code, out, _ := cli(t, "kill", strconv.Itoa(pid), tok, "--grace", "100ms")
		if code != 1 || !strings.Contains(out, "nothing signalled") {
			t.Errorf("kill(reissued) = %d %q, want 1 and nothing signalled", code, out)
		}
		if code, _, _ := cli(t, "verify", strconv.Itoa(pid), stok); code != 0 {
			t.Fatal("the stranger holding the reissued pid did not survive kill")
		}
		stranger.Stop()
		return
	}
	t.Fatal("could not reissue a pid")
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"defaults", nil, 0, "configuration is valid"},
		{"good file", []string{"--config", write("good.json", `{"grace":"10s","log_schema":"ocsf","mechanism":"netlink","graph_max_exited":100}`)}, 0, `"log_schema": "ocsf"`},
		{"flag wins", []string{"--config", write("g2.json", `{"grace":"10s"}`), "--grace", "3s"}, 0, `"grace": "3s"`},
		{"unknown key", []string{"--config", write("bad1.json", `{"gracee":"10s"}`)}, exitUsage, `unknown field "gracee"`},
		{"bad json", []string{"--config", write("bad2.json", `{"grace":`)}, exitUsage, "config"},
		{"bad mechanism", []string{"--mechanism", "pigeon"}, exitUsage, "mechanism"},
		{"bad schema", []string{"--log-schema", "cef"}, exitUsage, "log_schema"},
		{"bad output", []string{"--log-output", "carrier:pigeon"}, exitUsage, "log_output"},
		{"negative grace", []string{"--config", write("bad3.json", `{"grace":"-1s"}`)}, exitUsage, "negative duration -1s"},
		{"negative grace flag", []string{"--grace", "-1s"}, exitUsage, "grace"},
		{"grace over the API's", []string{"--grace", "2h"}, exitUsage, "grace"},
		{"grace over the API's in the file", []string{"--config", write("bad4.json", `{"grace":"2h"}`)}, exitUsage, "grace"},
		{"file over defaults", []string{"--config", write("g3.json", `{"reap_interval":"1m","max_final":5}`)}, 0, `"reap_interval": "1m0s"`},
		{"flag at its default wins", []string{"--config", write("g4.json", `{"grace":"10s"}`), "--grace", "5s"}, 0, `"grace": "5s"`},
		{"flag without a file", []string{"--retain-owed", "48h"}, 0, `"retain_owed": "48h0m0s"`},
		{"trailing bracket", []string{"--config", write("bad5.json", `{"grace":"10s"} ]`)}, exitUsage, "trailing data"},
		{"relative state dir", []string{"--state-dir", "rel/dir"}, exitUsage, "state_dir"},
		{"missing file", []string{"--config", dir + "/nope.json"}, exitUsage, "nope.json"},
		{"metrics address", []string{"--metrics-listen", "127.0.0.1:9464"}, 0, `"metrics_listen": "127.0.0.1:9464"`},
		{"bad metrics address", []string{"--metrics-listen", "9464"}, exitUsage, "metrics_listen"},
	}
	for _, tt := range tests {
		code, out, errs := cli(t, append([]string{"run", "--check-config"}, tt.args...)...)
		if code != tt.code || !strings.Contains(out+errs, tt.say) {
			t.Errorf("%s: run --check-config %q = %d, %q %q; want %d mentioning %q", tt.name, tt.args, code, out, errs, tt.code, tt.say)
		}
	}
}

// TestRunCode maps the errors daemon.Run returns, wrapped as it wraps them,
// to the exit codes `supervisor run --help` documents.
func TestRunCode(t *testing.T) {
	why := errors.New("needs CAP_BPF")
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("state_dir %q: want an absolute path: %w", "x", daemon.ErrConfig), exitUsage},
		{fmt.Errorf("%w: %w", daemon.ErrMechanism, tracker.ErrUnknownMechanism), exitUsage},
		{fmt.Errorf("%w: %w", daemon.ErrMechanism, why), exitUnavailable},
		{fmt.Errorf("/var/lib/x: %w (locked)", daemon.ErrAlreadyRunning), exitUnavailable},
		{daemon.ErrUnsupported, exitUnavailable},
		{fmt.Errorf("%w: %w", daemon.ErrStore, why), exitSoftware},
		{why, exitSoftware},
	}
	for _, tt := range tests {
		if got := runCode(tt.err); got != tt.want {
			t.Errorf("runCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// verdictWord is the verdict word verify prints first ("FOREIGN: reason").
func verdictWord(out string) string {
	w, _, _ := strings.Cut(out, ":")
	return w
}
