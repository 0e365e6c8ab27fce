package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationRefusalIsTheAnswer: nobody's kill of root's claim is
// refused by the daemon (held for another user), exit 77 with the
// daemon's reason, and nothing runs locally; nobody's kill of its own
// process, which the daemon does not hold, runs here and says so.
func TestIntegrationRefusalIsTheAnswer(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	roots := d.launch(t, "--", "sleep", "100")
	code, _, errs := d.run(t, asNobody, "kill", fmt.Sprint(roots.Pid), roots.Token.String(), "--grace", "0s")
	if code != exitNoPerm || !strings.Contains(errs, "held by the supervisor for another user") || strings.Contains(errs, "here") {
		t.Errorf("nobody's kill of root's claim: exit %d, stderr %q; want %d with the daemon's reason and no local teardown", code, errs, exitNoPerm)
	}
	if !owned(roots.Pid, roots.Token) {
		t.Fatal("root's claim was signalled for nobody")
	}

	own := exec.Command("sleep", "100")
	own.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.Process.Kill(); own.Wait() })
	// --held-only: a program that acts only on what it handed the daemon
	// is refused, and nothing is signalled.
	code, _, errs = d.run(t, asNobody, "kill", fmt.Sprint(own.Process.Pid), tokenOf(t, own.Process.Pid), "--grace", "0s", "--held-only")
	if code != client.ExitNoInput || !strings.Contains(errs, "not held") || strings.Contains(errs, "here") {
		t.Errorf("nobody's kill --held-only of its own unheld process: exit %d, stderr %q; want %d, refused, no teardown here", code, errs, client.ExitNoInput)
	}
	if !owned(int32(own.Process.Pid), tokenOf(t, own.Process.Pid)) {
		t.Fatal("kill --held-only signalled a process the daemon does not hold")
	}
	code, _, errs = d.run(t, asNobody, "kill", fmt.Sprint(own.Process.Pid), tokenOf(t, own.Process.Pid), "--grace", "0s")
	if code != client.ExitKillDead || !strings.Contains(errs, "the daemon does not hold") || !strings.Contains(errs, "here") {
		t.Errorf("nobody's kill of its own unheld process: exit %d, stderr %q; want %d and a note that it ran here", code, errs, client.ExitKillDead)
	}
}

// TestIntegrationDaemonNotKilled: root's kill of the daemon's own pid, or
// of its parent (this test), is refused with how to stop the service.
func TestIntegrationDaemonNotKilled(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	for _, pid := range []int{d.cmd.Process.Pid, os.Getpid()} {
		code, _, errs := d.run(t, nil, "kill", strconv.Itoa(pid), tokenOf(t, pid), "--grace", "0s")
		if code != exitNoPerm || !strings.Contains(errs, "systemctl stop procsupervisor") {
			t.Errorf("kill of %d: exit %d, stderr %q; want %d saying how to stop the service", pid, code, errs, exitNoPerm)
		}
	}
	// init: refused, with no advice about the service.
	code, _, errs := d.run(t, nil, "kill", "1", tokenOf(t, 1), "--grace", "0s")
	if code != exitNoPerm || !strings.Contains(errs, "pid 1 is init") || strings.Contains(errs, "systemctl") {
		t.Errorf("kill of init: exit %d, stderr %q; want %d, refused as init", code, errs, exitNoPerm)
	}
	if _, err := d.client.Status(t.Context()); err != nil {
		t.Fatalf("the daemon stopped answering: %v", err)
	}
}

// fakeSocket serves h on a Unix socket (an HTTP server that is not the
// daemon) until the test ends.
func fakeSocket(t *testing.T, h http.Handler) string {
	sock := filepath.Join(t.TempDir(), "other.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestIntegrationSocketErrors: a socket that answers but is not the
// daemon (supervisord's answers 404 "Not Found"), no socket, and a socket
// the user may not open are each said for what they are, with their codes.
func TestIntegrationSocketErrors(t *testing.T) {
	testenv.RequireRoot(t)
	notFound := fakeSocket(t, http.NotFoundHandler())
	anyJSON := fakeSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"version":"x","pid":1}`)
	}))
	state, sock := newDirs(t)
	startDaemon(t, state, sock) // root only: mode 0600
	tests := []struct {
		name, sock string
		cred       *syscall.Credential
		code       int
		want       []string
	}{
		{"supervisord-like", notFound, nil, exitUnavailable, []string{"not as the supervisor daemon", "404"}},
		{"any http server", anyJSON, nil, exitUnavailable, []string{"not as the supervisor daemon"}},
		{"no socket", filepath.Join(t.TempDir(), "none.sock"), nil, exitUnavailable, []string{"not reachable"}},
		{"refused", sock, asNobody, exitNoPerm, []string{"owner root, group root, mode S", "--socket-group"}},
	}
	for _, tt := range tests {
		cmd := exec.Command(binary(t), "status", "--socket", tt.sock)
		cmd.Dir = "/"
		if tt.cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tt.cred}
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		for _, w := range tt.want {
			if code != tt.code || !strings.Contains(errb.String(), w) {
				t.Errorf("%s: status exit %d, stderr %q; want %d and %q", tt.name, code, errb.String(), tt.code, w)
			}
		}
	}
	// A kill through a socket that is not the daemon runs here, and says why.
	victim := testenv.Start(t, "sleep", "100")
	cmd := exec.Command(binary(t), "kill", "--socket", notFound, fmt.Sprint(victim.Process.Pid), tokenOf(t, victim.Process.Pid), "--grace", "0s")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "not as the supervisor daemon") || !strings.Contains(string(out), "tearing it down here") {
		t.Errorf("kill through a foreign socket: %v %q; want a local teardown that says why", err, out)
	}
}

// termIgnoring launches a grant whose root ignores SIGTERM, and returns
// once it does (its shell has set the trap and exec'd sleep: a TERM sent
// before would end it).
func termIgnoring(t *testing.T, d *testDaemon) api.Claim {
	t.Helper()
	c := d.launch(t, "--", "sh", "-c", "trap '' TERM; exec sleep 100")
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.Pid))
		return err == nil && strings.TrimSpace(string(b)) == "sleep"
	}, "the root of %s never became sleep", c.ID)
	return c
}

// signalTimes returns the times of the daemon's signal_sent lines for pid,
// by signal name.
func (d *testDaemon) signalTimes(pid int32) map[string]time.Time {
	got := map[string]time.Time{}
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(d.sock), "log.json"))
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			At      time.Time `json:"@timestamp"`
			Event   struct{ Action string }
			Process struct{ Pid int32 }
			Super   struct{ Signal string } `json:"supervisor"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Event.Action == "signal_sent" && l.Process.Pid == pid {
			if _, ok := got[l.Super.Signal]; !ok {
				got[l.Super.Signal] = l.At
			}
		}
	}
	return got
}

// TestIntegrationInterruptedTeardownGoesOn: Ctrl-C on `release` and on
// `kill` of a TERM-ignoring claim mid-grace: the command says the teardown
// goes on in the daemon and how to follow it, exits 130, and SIGKILL comes
// only after the full grace; `wait` then reports the end.
func TestIntegrationInterruptedTeardownGoesOn(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	const grace = 3 * time.Second
	for _, how := range []string{"release", "kill"} {
		c := termIgnoring(t, d)
		args := []string{"release", c.ID}
		follow := "supervisor wait " + c.ID
		if how == "kill" {
			args = []string{"kill", fmt.Sprint(c.Pid), c.Token.String()}
			follow = fmt.Sprintf("supervisor wait %d %s", c.Pid, c.Token)
		}
		cmd := exec.Command(binary(t), append(args, "--grace", grace.String())...)
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, func() bool { return d.claim(t, c.ID).State == store.Releasing },
			"%s: claim %s never releasing", how, c.ID)
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(errb.String(), "goes on in the daemon") || !strings.Contains(errb.String(), follow) {
			t.Errorf("%s interrupted: %v, stderr %q; want exit 130 saying the teardown goes on and %q", how, err, errb.String(), follow)
		}
		if !owned(c.Pid, c.Token) {
			t.Errorf("%s: the root died when its client left, before its grace", how)
		}
		wargs := []string{"wait", c.ID, "--timeout", "30s"}
		code, out, errs := d.run(t, nil, wargs...)
		if code != 0 || !strings.Contains(out, c.ID+" released: requested") {
			t.Errorf("%s: wait: exit %d, %q %q; want 0 and the release", how, code, out, errs)
		}
		sig := d.signalTimes(c.Pid)
		term, kill := sig["SIGTERM"], sig["SIGKILL"]
		if term.IsZero() || kill.IsZero() || kill.Sub(term) < grace-100*time.Millisecond {
			t.Errorf("%s: SIGTERM at %v, SIGKILL at %v: want SIGKILL after the full grace of %v", how, term, kill, grace)
		}
	}
}

// TestIntegrationWait: wait and launch --wait report how a claim ended,
// with its exit code; a timeout is 75; another user's claim is not found.
func TestIntegrationWait(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	// The job outlives its launch: one that exits at once can lose its
	// exit code to a race of the daemon's (see launch --wait below).
	job := d.launch(t, "--detach", "--", "sh", "-c", "sleep 1; exit 3")
	code, out, errs := d.run(t, nil, "wait", job.ID, "--timeout", "30s")
	if code != 1 || strings.TrimSpace(out) != job.ID+" exited (3)" {
		t.Errorf("wait for a job that exits 3: exit %d, %q %q; want 1 and its code", code, out, errs)
	}
	// launch --wait ends when the claim has, with wait's code for it. (Its
	// exit code may be unknown: a job this short can be judged gone before
	// its status is collected, a race of the daemon's.)
	code, out, _ = d.run(t, nil, "launch", "--json", "--wait", "--detach", "--", "true")
	var launched api.Claim
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&launched); err != nil || launched.ID == "" {
		t.Fatalf("launch --json --wait printed %q: %v", out, err)
	}
	if got := d.claim(t, launched.ID); !client.Final(got.State) || code != client.WaitCode(got) || !strings.Contains(out, launched.ID+" exited") {
		t.Errorf("launch --wait of true: exit %d, %q; claim now %s", code, out, got.State)
	}
	long := d.launch(t, "--", "sleep", "100")
	if code, _, errs := d.run(t, nil, "wait", long.ID, "--timeout", "200ms"); code != 75 || !strings.Contains(errs, "timed out") {
		t.Errorf("wait with a timeout on a running claim: exit %d %q, want 75", code, errs)
	}
	if code, _, errs := d.run(t, asNobody, "wait", long.ID); code != exitNoProcess {
		t.Errorf("nobody waiting for root's claim: exit %d %q, want %d", code, errs, exitNoProcess)
	}
	if code, out, _ := d.run(t, nil, "wait", fmt.Sprint(long.Pid), long.Token.String(), "--timeout", "200ms"); code != 75 {
		t.Errorf("wait PID TOKEN on a live process: exit %d %q, want 75", code, out)
	}
	zero := api.Duration(0)
	if _, err := d.client.Release(t.Context(), long.ID, &api.ReleaseRequest{Grace: &zero}); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := d.run(t, nil, "wait", fmt.Sprint(long.Pid), long.Token.String(), "--timeout", "30s"); code != 0 || strings.TrimSpace(out) != "GONE" {
		t.Errorf("wait PID TOKEN on a released claim: exit %d %q, want 0 GONE", code, out)
	}
}

// TestIntegrationProgressOnTerminal: release and kill through the daemon
// of a TERM-ignoring claim, with stderr on a terminal, say each step of
// the teardown as the daemon takes it; on a pipe they say nothing.
func TestIntegrationProgressOnTerminal(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	for _, how := range []string{"release", "kill"} {
		c := termIgnoring(t, d)
		args := []string{"release", c.ID}
		if how == "kill" {
			args = []string{"kill", fmt.Sprint(c.Pid), c.Token.String()}
		}
		master, tty, _ := testenv.Pty(t)
		cmd := exec.Command(binary(t), append(args, "--grace", "300ms")...)
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
		cmd.Stderr = tty
		// Read while the terminal is open: what a writer leaves in it can
		// be lost to the hangup when its last end closes.
		var got lockedBuffer
		go io.Copy(&got, master) // ends with EIO when the test closes tty
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		want := fmt.Sprintf("supervisor %s: SIGTERM to 1\r\nsupervisor %s: waiting up to 300ms\r\nsupervisor %s: SIGKILL to 1\r\n", how, how, how)
		if !testenv.Poll(10*time.Second, func() bool { return got.String() == want }) {
			t.Errorf("%s on a terminal wrote %q, want %q", how, got.String(), want)
		}
		tty.Close()
	}
	c := d.launch(t, "--", "sleep", "100")
	if code, _, errs := d.run(t, nil, "release", "--grace", "0s", c.ID); code != 0 || errs != "" {
		t.Errorf("release on a pipe: exit %d, stderr %q; want nothing on stderr", code, errs)
	}
}
