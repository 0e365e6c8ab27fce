package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/cmddoc"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

var updateMan = flag.Bool("update-man", false, "rewrite docs/supervisor.1 from the command registry")

// TestManPage: docs/supervisor.1 is what the registry generates today.
// Regenerate it with `go test ./cmd/supervisor -run TestManPage -update-man`.
func TestManPage(t *testing.T) {
	// The page documents root's defaults (the socket, the state directory).
	testenv.RequireRoot(t)
	var b bytes.Buffer
	if err := cmddoc.Man(&b, cmddoc.Supervisor, registry()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "supervisor.1")
	if *updateMan {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, b.Bytes()) {
		t.Errorf("%s is stale: regenerate it with `go test ./cmd/supervisor -run TestManPage -update-man`", path)
	}
	for _, c := range registry() {
		if !bytes.Contains(old, []byte(".SS \"supervisor "+c.Name)) {
			t.Errorf("the man page has no section for %s", c.Name)
		}
	}
}

// TestRegistry: every command reaches its flag parsing on --help, so the
// registry knows every command and its flags.
func TestRegistry(t *testing.T) {
	reg := registry()
	if len(reg) != len(commands) {
		t.Fatalf("registry has %d commands, want %d", len(reg), len(commands))
	}
	flags := map[string][]string{}
	for _, c := range reg {
		for _, f := range c.Flags {
			flags[c.Name] = append(flags[c.Name], f.Name)
		}
	}
	for cmd, want := range map[string][]string{
		"list":   {"a", "json", "owner", "socket", "state", "watch"},
		"launch": {"bind-to-caller", "cwd", "detach", "json", "no-new-privs", "owner", "socket", "wall-clock"},
		"tree":   {"json", "mechanism", "socket", "tokens"},
	} {
		for _, f := range want {
			if !slices.Contains(flags[cmd], f) {
				t.Errorf("registry: %s has flags %q, want --%s among them", cmd, flags[cmd], f)
			}
		}
	}
}

func TestCompletionCommand(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errs := cli(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "supervisor") || !strings.Contains(out, "watch") {
			t.Errorf("completion %s = %d %q %q, want a script that knows list --watch", sh, code, out, errs)
		}
	}
	if code, out, _ := cli(t, "completion", "tcsh"); code != exitUsage || out != "" {
		t.Errorf("completion tcsh = %d %q, want %d and nothing", code, out, exitUsage)
	}
	code, out, _ := cli(t, "completion", "bash")
	if code != 0 {
		t.Fatal(code)
	}
	prog := out + "\nCOMP_WORDS=(supervisor list --wa)\nCOMP_CWORD=2\n_supervisor\necho \"${COMPREPLY[@]}\"\n"
	if got, err := exec.Command("bash", "--norc", "-c", prog).CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "--watch" {
		t.Errorf("bash completion of list --wa = %q %v, want --watch", got, err)
	}
}

// TestVersion builds the binary (go build stamps the commit) and reads
// what it says about itself.
func TestVersion(t *testing.T) {
	code, out, errs := cli(t, "version")
	if code != 0 || !strings.Contains(out, "go           "+runtime.Version()+"\n") {
		t.Errorf("version = %d %q %q, want the Go version", code, out, errs)
	}
	if runtime.GOOS == "linux" {
		obj, err := os.ReadFile("../../internal/events/tracepoint/process_bpfel.o")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(obj)
		if want := "bpf object   sha256:" + hex.EncodeToString(sum[:]) + "\n"; !strings.Contains(out, want) {
			t.Errorf("version = %q, want %q", out, want)
		}
	}
	// go build stamps the commit when it finds the repository (this
	// machine's go env may turn that off: ask for it). It does not in a
	// git worktree, whose .git is a file: then only the module is checked.
	bin := filepath.Join(t.TempDir(), "supervisor")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "supervisor   dev\n") {
		t.Errorf("built binary's version:\n%s\nwant the module's version, not dev", got)
	}
	_, rev, stamped := strings.Cut(string(meta), "vcs.revision=")
	if !stamped {
		testenv.Skip(t, "go build stamped no commit here (no .git?), so the commit line was not checked:\n%s", got)
	}
	rev, _, _ = strings.Cut(rev, "\n")
	if want := "commit       " + rev; !strings.Contains(string(got), want) || !strings.Contains(string(got), "commit date  20") {
		t.Errorf("built binary's version:\n%s\nwant %q and a commit date", got, want)
	}
}

// launchBackend answers a launch with a claim of the argv it was asked to
// run, and keeps the request.
type launchBackend struct {
	api.Backend
	mu  sync.Mutex
	got *api.LaunchRequest
}

func (b *launchBackend) Launch(_ context.Context, _ api.Peer, r *api.LaunchRequest) (api.Claim, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = r
	return api.Claim{ID: "g-abcdefghijkl", Kind: store.Grant, Argv: r.Argv, Owner: r.Owner, Pid: 4242,
		Token: token.Token{Start: 1, Prec: token.Ticks}, State: store.Running}, nil
}

// TestLaunchArgv: launch's own flags end at the program's name, so a
// program's flags are its own, with or without "--"; the answer is one
// line (JSON with --json, unescaped).
func TestLaunchArgv(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	b := &launchBackend{}
	srv := api.NewServer(b, nil)
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	for _, c := range []struct {
		args  []string
		argv  []string
		owner string
	}{
		{[]string{"ls", "-la"}, []string{"ls", "-la"}, ""},
		{[]string{"--owner", "o", "ls", "-la", "--owner", "x"}, []string{"ls", "-la", "--owner", "x"}, "o"},
		{[]string{"--owner", "o", "--", "ls", "-la"}, []string{"ls", "-la"}, "o"},
		{[]string{"sh", "-c", "--", "--json"}, []string{"sh", "-c", "--", "--json"}, ""},
	} {
		code, out, errs := cli(t, append([]string{"launch", "--socket", sock}, c.args...)...)
		b.mu.Lock()
		got := b.got
		b.mu.Unlock()
		if code != 0 || got == nil || !slices.Equal(got.Argv, c.argv) || got.Owner != c.owner {
			t.Errorf("launch %q = %d %q; asked %+v, want argv %q owner %q", c.args, code, errs, got, c.argv, c.owner)
		}
		if want := "g-abcdefghijkl 4242 v1:t:00000000000000000000000000000000:1:-\n"; out != want {
			t.Errorf("launch %q printed %q, want %q", c.args, out, want)
		}
	}
	code, out, errs := cli(t, "launch", "--socket", sock, "--json", "sh", "-c", "a && b <c>")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"argv":["sh","-c","a && b <c>"]`) {
		t.Errorf("launch --json = %d %q %q, want one line, & < > unescaped", code, out, errs)
	}
}

// TestVerifyReason: the verdict word, then its reason and who judged, on
// one line; --json as before.
func TestVerifyReason(t *testing.T) {
	c := exec.Command("sleep", "600")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	pid := strconv.Itoa(c.Process.Pid)
	tok := tokenOf(t, c.Process.Pid)
	tk, err := token.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	tk.Start++
	code, out, _ := cli(t, "verify", pid, tk.String(), "--socket", "/nonexistent")
	if want := "FOREIGN: start time differs: the pid was reissued (by local:"; code != client.ExitForeign || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("verify of another instance = %d %q, want %d and a line starting %q", code, out, client.ExitForeign, want)
	}
	code, out, _ = cli(t, "verify", pid, tok, "--socket", "/nonexistent", "--json")
	if code != 0 || !strings.HasPrefix(out, `{"pid":`) || !strings.Contains(out, `"verdict":"OWNED"`) {
		t.Errorf("verify --json = %d %q", code, out)
	}
}
