package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationRedactClaimViews: a daemon with --redact-args
// '--password=*'; uid 65534 launches a shell with --password=SECRET in
// its argv, which writes the argv it received to a file and keeps a child
// running. The workload got the real argument, and the secret is in none
// of: the launch answer, list and show (text and JSON), tree through the
// daemon (text and JSON), the API's raw JSON answers, the ECS log file,
// any file of the state directory; each of those that has room says the
// arguments were redacted. After a release, `list -a` is still redacted.
func TestIntegrationRedactClaimViews(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--log-process-events",
		"--redact-args", "--password=*")
	secret := fmt.Sprintf("s3cret-%d-%d", os.Getpid(), time.Now().UnixNano())
	// The workload, a script in its working directory (a short command
	// line fits list's column), writes the arguments it got.
	outDir := t.TempDir()
	os.Chmod(outDir, 0o777)
	os.Chmod(filepath.Dir(outDir), 0o755)
	argvFile := filepath.Join(outDir, "argv")
	script := "printf '%s\\n' \"$@\" > argv.tmp && mv argv.tmp argv; sleep 600; :\n"
	if err := os.WriteFile(filepath.Join(outDir, "w"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errs := d.run(t, asNobody, "launch", "--json", "--cwd", outDir, "--", "sh", "w", "--password="+secret)
	if code != 0 {
		t.Fatalf("launch as nobody: exit %d: %s", code, errs)
	}
	var cl api.Claim
	if err := json.Unmarshal([]byte(out), &cl); err != nil {
		t.Fatalf("launch output %q: %v", out, err)
	}
	wantArgv := []string{"sh", "w", "--password=[REDACTED]"}
	if !slices.Equal(cl.Argv, wantArgv) || !cl.ArgsRedacted || cl.UID != nobody {
		t.Errorf("launch answer: argv %q redacted %v uid %d, want %q true %d", cl.Argv, cl.ArgsRedacted, cl.UID, wantArgv, nobody)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { _, err := os.Stat(argvFile); return err == nil }, "the workload never wrote its argv")
	if got := readFile(argvFile); got != "--password="+secret+"\n" {
		t.Errorf("the workload received %q, want its real arguments", got)
	}

	views := map[string]string{"launch --json": out}
	see := func(name string, cred *syscall.Credential, args ...string) string {
		t.Helper()
		code, out, errs := d.run(t, cred, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		views[name] = out + errs
		return out
	}
	pid := fmt.Sprint(cl.Pid)
	// The tree: the shell and its sleep, once the daemon's graph has both.
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, out, _ := d.run(t, asNobody, "tree", pid)
		return strings.Contains(out, "sleep")
	}, "tree %s never showed the shell's child", pid)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"list", []string{"list"}, "--password=[REDACTED]"},
		{"list --json", []string{"list", "--json"}, `"args_redacted": true`},
		{"show", []string{"show", cl.ID}, "--password=[REDACTED]  (arguments redacted)"},
		{"show --json", []string{"show", "--json", cl.ID}, `"args_redacted": true`},
		{"tree", []string{"tree", pid}, "--password=[REDACTED]"},
		{"tree --json", []string{"tree", "--json", pid}, `"args_redacted": true`},
	} {
		for _, who := range []struct {
			name string
			cred *syscall.Credential
		}{{"nobody", asNobody}, {"root", nil}} {
			if got := see(c.name+" as "+who.name, who.cred, c.args...); !strings.Contains(got, c.want) {
				t.Errorf("%s as %s lacks %q:\n%s", c.name, who.name, c.want, got)
			}
		}
	}
	hc := rawClient(sock)
	for _, path := range []string{"/claims", "/claims/" + cl.ID, "/tree?pid=" + pid} {
		resp, err := hc.Get("http://supervisor" + api.Version + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"args_redacted":true`) {
			t.Errorf("GET %s = %d %s, want the arguments marked redacted", path, resp.StatusCode, b)
		}
		views["GET "+path] = string(b)
	}
	logPath := filepath.Join(filepath.Dir(sock), "log.json")
	testenv.Eventually(t, 20*time.Second, func() bool {
		log := readFile(logPath)
		return strings.Contains(log, `"launch_requested"`) && strings.Contains(log, `"process_exec"`) && strings.Contains(log, `"args":["sh","w","--password=[REDACTED]"]`)
	}, "never: the launch's request and the workload's exec in the log\n%s", readFile(logPath))

	see("release", asNobody, "release", "--grace", "0s", cl.ID)
	if got := see("list -a", asNobody, "list", "-a", "--json"); !strings.Contains(got, `"args_redacted": true`) {
		t.Errorf("list -a after the release lacks the mark:\n%s", got)
	}
	d.term() // the log and the state directory are complete
	views["the ECS log file"] = readFile(logPath)
	views["the daemon's stderr"] = d.stderr.String()
	if _, err := os.Stat(filepath.Join(state, "claims.db")); err != nil {
		t.Errorf("no store file: %v", err)
	}
	if stateHolds(t, state, secret) {
		t.Errorf("a file of the state directory %s holds the secret", state)
	}
	for what, s := range views {
		if strings.Contains(s, secret) {
			t.Errorf("%s holds the secret:\n%s", what, s)
		}
	}
}

// TestIntegrationRedactOldState: a claim stored by a daemon without
// patterns loads in a daemon restarted with them, and from then on list,
// show and the API show it redacted and marked, and no file of the state
// directory holds the secret any more (the store rewrites the claim and
// compacts the file as it opens).
func TestIntegrationRedactOldState(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	secret := fmt.Sprintf("old-s3cret-%d-%d", os.Getpid(), time.Now().UnixNano())
	cl := d.launch(t, "--", "/bin/sh", "-c", "sleep 600; :", "sh", "--password="+secret)
	if cl.ArgsRedacted || !slices.Contains(cl.Argv, "--password="+secret) {
		t.Fatalf("without patterns: argv %q redacted %v, want the argument as given", cl.Argv, cl.ArgsRedacted)
	}
	d.term()
	if !stateHolds(t, state, secret) {
		t.Fatal("the state directory does not hold the secret before the restart: the test proves nothing")
	}
	d = startDaemon(t, state, sock, "--redact-args", "--password=*")
	want := []string{"/bin/sh", "-c", "sleep 600; :", "sh", "--password=[REDACTED]"}
	if got := d.claim(t, cl.ID); !slices.Equal(got.Argv, want) || !got.ArgsRedacted {
		t.Errorf("after a restart with patterns: argv %q redacted %v, want %q true", got.Argv, got.ArgsRedacted, want)
	}
	for _, args := range [][]string{{"list", "--json"}, {"show", cl.ID}} {
		code, out, errs := d.run(t, nil, args...)
		if code != 0 || strings.Contains(out, secret) || !strings.Contains(out, "--password=[REDACTED]") {
			t.Errorf("%q after the restart = %d %s%s, want it redacted", args, code, out, errs)
		}
	}
	if stateHolds(t, state, secret) {
		t.Error("a file of the state directory still holds the secret after the restart")
	}
}

// stateHolds reports whether a file under state holds s.
func stateHolds(t *testing.T, state, s string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(state, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.Contains(readFile(path), s) {
			found = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestIntegrationRedactTreeCut: `supervisor tree` through the daemon reads
// each process's command line from /proc up to procfs.MaxCmdline bytes; a
// vector cut there inside a secret a pattern hides whole is redacted too.
// The first 8 bytes of an access key were shown before: the cut argument
// matched no pattern.
func TestIntegrationRedactTreeCut(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--redact-args", "AKIA????????????????")
	// "sh\0-c\0sleep 600\0" is 16 bytes, the padding and its NUL end 8
	// bytes before the bound: the key is cut after "AKIAQWER".
	pad := strings.Repeat("p", procfs.MaxCmdline-8-16-1)
	cl := d.launch(t, "--owner", "root", "--", "sh", "-c", "sleep 600", pad, "AKIAQWERTYUIOPASDFGH")
	defer d.run(t, nil, "release", cl.ID)
	pid := fmt.Sprint(cl.Pid)
	var tree string
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, tree, _ = d.run(t, nil, "tree", "--json", pid)
		return strings.Contains(tree, `"sleep`) || strings.Contains(tree, pad[:64])
	}, "tree %s never showed the shell's command line", pid)
	if !strings.Contains(tree, `"args_redacted": true`) {
		t.Errorf("tree --json does not mark the cut key's redaction:\n%.600s", tree)
	}
	_, text, _ := d.run(t, nil, "tree", pid)
	for what, s := range map[string]string{"tree --json": tree, "tree": text} {
		if strings.Contains(s, "QWER") {
			t.Errorf("%s shows the start of the key:\n%s", what, s)
		}
	}
}

// TestIntegrationRedactAdmitCut: an admitted process's argv, read from
// /proc up to 16 KiB for the claim, is redacted before it is cut and
// stored: a key straddling the bound showed its first 8 bytes in the
// claim (show, the store) before, as the cut argument matched no pattern.
func TestIntegrationRedactAdmitCut(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--redact-args", "AKIA????????????????")
	// "sh\0-c\0sleep 600\0" is 16 bytes: the padding and its NUL end 8
	// bytes before the 16 KiB read.
	pad := strings.Repeat("p", 16<<10-8-16-1)
	sh := exec.Command("/bin/sh", "-c", "sleep 600", pad, "AKIAQWERTYUIOPASDFGH")
	cl := admitStarted(t, d, sh)
	if !cl.ArgsRedacted || len(cl.Argv) == 0 || cl.Argv[len(cl.Argv)-1] != "[REDACTED]" {
		t.Errorf("admitted claim: args_redacted %v, last argument %.40q, want the cut key redacted", cl.ArgsRedacted, cl.Argv[len(cl.Argv)-1:])
	}
	_, show, _ := d.run(t, nil, "show", "--json", cl.ID)
	admitted, _ := json.Marshal(cl)
	for what, s := range map[string]string{"admit": string(admitted), "show --json": show} {
		if strings.Contains(s, "QWER") {
			t.Errorf("%s shows the start of the key", what)
		}
	}
}

// TestIntegrationRedactJoinedArgs: a secret inside an argument with
// spaces (a shell's script here; a command line a process joined into
// one with setproctitle reads the same in /proc) is redacted word by
// word wherever /proc is read: the netlink feed's exec line, admit's
// claim (the answer, show, the store), and tree. Before, only a pattern
// matching the whole argument hid it, and the joined command line of a
// process showed the secret in tree, the store and the feed.
func TestIntegrationRedactJoinedArgs(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--mechanism", "netlink", "--log-process-events", "--redact-args", "--password=*")
	logPath := filepath.Join(filepath.Dir(sock), "log.json")
	secret := fmt.Sprintf("j0ined-%d-%d", os.Getpid(), time.Now().UnixNano())
	sh := exec.Command("/bin/sh", "-c", "sleep 600; : --password="+secret)
	cl := admitStarted(t, d, sh)
	want := "sleep 600; : --password=[REDACTED]"
	if !cl.ArgsRedacted || len(cl.Argv) != 3 || cl.Argv[2] != want {
		t.Errorf("admitted claim: argv %q, args_redacted %v; want the script %q, marked", cl.Argv, cl.ArgsRedacted, want)
	}
	pid := strconv.Itoa(sh.Process.Pid)
	var tree string
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, tree, _ = d.run(t, nil, "tree", "--json", pid)
		return strings.Contains(tree, "sleep 600")
	}, "tree %s never showed the shell's command line", pid)
	if !strings.Contains(tree, `"args_redacted": true`) {
		t.Errorf("tree --json does not mark the script's redaction:\n%.600s", tree)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		return strings.Contains(readFile(logPath), "sleep 600; : --password=[REDACTED]")
	}, "the feed never wrote the shell's exec line, redacted:\n%s", readFile(logPath))
	_, show, _ := d.run(t, nil, "show", "--json", cl.ID)
	for what, s := range map[string]string{"admit": fmt.Sprintf("%+v", cl), "show --json": show, "tree --json": tree, "log": readFile(logPath)} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the secret", what)
		}
	}
	files := 0
	err := filepath.WalkDir(state, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Errorf("reading the state directory %s: %v, %d files read; want the store at least", state, err, files)
	}
}

// admitStarted starts cmd, admits it as root and returns the claim; the
// claim is released and cmd killed when the test ends.
func admitStarted(t *testing.T, d *testDaemon, cmd *exec.Cmd) api.Claim {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	code, out, errs := d.run(t, nil, "admit", strconv.Itoa(cmd.Process.Pid), tokenOf(t, cmd.Process.Pid))
	if code != 0 {
		t.Fatalf("admit: exit %d: %s", code, errs)
	}
	var cl api.Claim
	if err := json.Unmarshal([]byte(out), &cl); err != nil {
		t.Fatalf("admit output %.300q: %v", out, err)
	}
	t.Cleanup(func() { d.run(t, nil, "release", cl.ID) })
	return cl
}
