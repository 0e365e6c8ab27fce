package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// askEnv makes the test binary ask the daemon at $SUPERVISOR_SOCKET one
// question about an instance, "WHAT PID TOKEN" (WHAT: admit, holder,
// tree, verify; TOKEN "-" for none), print the answer (the error, then the result as JSON)
// and exit. With askAsEnv ("UID:GID") it first becomes that user, so a
// root parent can mount a /proc of the asker's own before it asks.
const (
	askEnv   = "SUPERVISOR_TEST_ASK"
	askAsEnv = "SUPERVISOR_TEST_ASK_AS"
)

func init() {
	q := os.Getenv(askEnv)
	if q == "" {
		return
	}
	if as := os.Getenv(askAsEnv); as != "" {
		var uid, gid int
		if _, err := fmt.Sscanf(as, "%d:%d", &uid, &gid); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		// Every thread takes them (Go 1.16+).
		if err := syscall.Setgroups(nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := syscall.Setresgid(gid, gid, gid); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := syscall.Setresuid(uid, uid, uid); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	f := strings.Fields(q)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "%s=%q: want WHAT PID TOKEN\n", askEnv, q)
		os.Exit(2)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var tok token.Token
	if f[2] != "-" {
		if tok, err = token.Parse(f[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	c := api.NewClient(os.Getenv("SUPERVISOR_SOCKET"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var res any
	switch f[0] {
	case "admit":
		res, err = c.Admit(ctx, &api.AdmitRequest{Pid: int32(pid), Token: tok})
	case "holder":
		res, err = c.Launch(ctx, &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/", Bind: true,
			Holder: &api.Instance{Pid: int32(pid), Token: tok}})
	case "tree":
		res, err = c.Tree(ctx, int32(pid), tok)
	case "verify":
		res, err = c.Verify(ctx, int32(pid), tok)
	default:
		fmt.Fprintf(os.Stderr, "%s: unknown question %q\n", askEnv, f[0])
		os.Exit(2)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("%v\n%s\n", err, b)
	os.Exit(0)
}

// ask runs the question as nobody (a copy of the test binary any user may
// run, testenv.SelfAs), through wrap (a command line the binary and its
// flags are appended to, run as root: the binary then becomes nobody
// itself) when given, and returns the answer.
func ask(t *testing.T, d *testDaemon, wrap []string, what string, pid int32, tok token.Token) string {
	t.Helper()
	tokArg := "-" // none
	if !tok.IsZero() {
		tokArg = tok.String()
	}
	env := []string{"SUPERVISOR_SOCKET=" + d.sock, fmt.Sprintf("%s=%s %d %s", askEnv, what, pid, tokArg)}
	cmd := testenv.SelfAs(t, asNobody, env, "-test.run=^$")
	if len(wrap) > 0 {
		self := cmd.Path
		cmd = exec.Command(wrap[0], append(wrap[1:], self, "-test.run=^$")...)
		cmd.Env = append(os.Environ(), append(env, fmt.Sprintf("%s=%d:%d", askAsEnv, nobody, nobody))...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %d %s as nobody: %v: %s%s", what, pid, tok, err, out, stderr.String())
	}
	return string(out)
}

// TestIntegrationHidepidTokenOneAnswer: under hidepid=2 a user may not
// learn the start time of another user's process. Admit, a launch bound
// to a holder, and tree each take a token; each must answer nobody's
// question about root's claim the same way for the right token and for
// one a tick off. Before, admit said "start time differs" (409) for every
// wrong tick and "belongs to another user" (403) for the right one, a
// holder the same, and tree 404 against 200: 748 admits found a start
// time in 5 s.
func TestIntegrationHidepidTokenOneAnswer(t *testing.T) {
	testenv.RequireRoot(t)
	wrap := []string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		"mount -t proc -o hidepid=2 proc /proc && exec $0"}
	d, _ := startDaemonWith(t, nil, nil, wrap, "--socket-group", fmt.Sprint(nobody))
	roots := d.launch(t, "sleep", "1000")
	t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", roots.ID) })
	right := roots.Token
	off := right
	off.Start--
	for _, what := range []string{"admit", "holder", "tree"} {
		a, b := ask(t, d, nil, what, roots.Pid, right), ask(t, d, nil, what, roots.Pid, off)
		if a != b {
			t.Errorf("nobody's %s of root's hidden process answers the right start time and one a tick off apart:\n right: %s off:   %s", what, a, b)
		}
		if what != "tree" && strings.HasPrefix(a, "<nil>\n") {
			t.Errorf("nobody's %s of root's hidden process was taken: %s", what, a)
		}
	}
	// Its own process, visible to it, still answers.
	own := launchAs(t, d, "sleep", "1000")
	t.Cleanup(func() { d.run(t, asNobody, "release", "--grace", "0s", own.ID) })
	if a := ask(t, d, nil, "tree", own.Pid, own.Token); !strings.HasPrefix(a, "<nil>\n") || !strings.Contains(a, `"pid":`+fmt.Sprint(own.Pid)) {
		t.Errorf("nobody's tree of its own process = %s, want it", a)
	}
}

// TestIntegrationCallerHidepid: the caller's own /proc decides what it
// may be shown, not only the daemon's. nobody asks from a mount namespace
// of its own whose /proc is mounted hidepid=2 (a sandbox, systemd's
// ProtectProc=invisible) while the daemon's /proc hides nothing. Before,
// verify judged root's process OWNED for it and tree gave root's command
// line, which its own /proc hid.
func TestIntegrationCallerHidepid(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	const marker = "hidden-from-nobody-7361"
	roots := d.launch(t, "sh", "-c", "sleep 1000; : "+marker)
	t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", roots.ID) })
	sandbox := []string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount -t proc -o hidepid=2 proc /proc && exec "$0" "$@"`}
	if a := ask(t, d, sandbox, "verify", roots.Pid, roots.Token); !strings.Contains(a, "UNVERIFIABLE") {
		t.Errorf("nobody's verify of root's process from behind hidepid = %s, want UNVERIFIABLE", a)
	}
	if a := ask(t, d, sandbox, "tree", roots.Pid, token.Token{}); strings.Contains(a, marker) || strings.Contains(a, roots.Token.String()) {
		t.Errorf("nobody's tree of root's process from behind hidepid shows it: %s", a)
	}
	// Without the sandbox the same user is shown what its /proc shows.
	if a := ask(t, d, nil, "verify", roots.Pid, roots.Token); !strings.Contains(a, "OWNED") {
		t.Errorf("nobody's verify of root's process without hidepid = %s, want OWNED", a)
	}
}
