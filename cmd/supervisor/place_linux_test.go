package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// runIn runs the supervisor command at bin as cred (nil: root) with attr's
// namespaces and root directory, against the socket at sock, and returns
// its exit code and output. A command that has not ended in 20 s is killed
// and fails the test (an events stream the daemon accepted never ends).
func runIn(t *testing.T, bin, sock string, cred *syscall.Credential, attr *syscall.SysProcAttr, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"SUPERVISOR_SOCKET=" + sock, "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	a := *attr
	a.Credential = cred
	cmd.SysProcAttr = &a
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%q as %v in %+v: still running after 20 s: %s", args, cred, attr, out.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return 0, out.String()
}

// TestIntegrationCallerInAnotherPidNamespace: a caller that root confined
// to a pid namespace of its own (a container's) cannot see or signal
// nobody's processes outside it. Through the daemon it could: tree
// showed a host process's token, admit took it and kill killed it. The
// pids such a caller names are its namespace's, not the daemon's, so
// every request but status is refused, for root's uid too, and nothing
// outside is touched.
func TestIntegrationCallerInAnotherPidNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))

	outside := exec.Command("sleep", "1000")
	outside.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Process.Kill(); outside.Wait() })
	pid := fmt.Sprint(outside.Process.Pid)
	tok := tokenOf(t, outside.Process.Pid)
	// A claim of nobody's, made from the daemon's namespace.
	c := launchAs(t, d, "sleep", "1000")
	t.Cleanup(func() { d.run(t, asNobody, "release", "--grace", "0s", c.ID) })

	ns := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	for _, who := range []struct {
		name string
		cred *syscall.Credential
	}{{"nobody", asNobody}, {"root", nil}} {
		for _, args := range [][]string{
			{"tree", "--tokens", pid},
			{"tree"},
			{"admit", pid, tok},
			{"verify", pid, tok},
			{"kill", "--grace", "0s", pid, tok},
			{"launch", "--", "true"},
			{"list"},
			{"show", c.ID},
			{"release", "--grace", "0s", c.ID},
			{"events"},
		} {
			code, out := runIn(t, binary(t), sock, who.cred, ns, args...)
			if code != 77 || !strings.Contains(out, "pid namespace") {
				t.Errorf("%s in a pid namespace of its own: %q = exit %d: %s; want 77, refused for the namespace", who.name, args, code, out)
			}
		}
		if code, out := runIn(t, binary(t), sock, who.cred, ns, "status"); code != 0 || !strings.Contains(out, "mechanism") {
			t.Errorf("%s in a pid namespace of its own: status = exit %d: %s; want it answered", who.name, code, out)
		}
	}
	if !owned(int32(outside.Process.Pid), tok) {
		t.Errorf("nobody's process %d outside the namespace was signalled", outside.Process.Pid)
	}
	if got := d.claim(t, c.ID); got.State != "running" || !owned(c.Pid, c.Token) {
		t.Errorf("nobody's claim %s after the namespace's requests: %s, root alive %v; want running", c.ID, got.State, owned(c.Pid, c.Token))
	}
	if code, out, errs := d.run(t, nil, "list"); code != 0 || strings.Count(out, "\n") != 2 {
		t.Errorf("root's list after the namespace's requests = exit %d %q %s; want the one claim made outside", code, out, errs)
	}
	// From the daemon's namespace, the same user is served.
	if code, out, errs := d.run(t, asNobody, "verify", pid, tok); code != 0 || !strings.HasPrefix(out, "OWNED") {
		t.Errorf("nobody's verify of its own process from the daemon's namespace = exit %d %q %s; want OWNED", code, out, errs)
	}
}

// TestIntegrationLaunchFromAnotherRoot: a workload runs under the
// daemon's root directory, so a launch by a user that root confined to a
// chroot would run outside it: refused, while the rest is served. Root
// may chroot itself and is served.
func TestIntegrationLaunchFromAnotherRoot(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	jail := filepath.Join(filepath.Dir(sock), "jail")
	if err := os.Mkdir(jail, 0o755); err != nil {
		t.Fatal(err)
	}
	// A static build: the jail holds no libraries.
	bin := filepath.Join(jail, "supervisor")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v: %s", err, out)
	}
	if err := os.Link(sock, filepath.Join(jail, "s.sock")); err != nil {
		t.Fatal(err)
	}
	jailed := &syscall.SysProcAttr{Chroot: jail}
	code, out := runIn(t, "/supervisor", "/s.sock", asNobody, jailed, "launch", "--", "/bin/true")
	if code != 77 || !strings.Contains(out, "root directory") {
		t.Errorf("nobody's launch from a chroot = exit %d: %s; want 77, refused for its root directory", code, out)
	}
	if code, out, errs := d.run(t, nil, "list", "-a"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("list after nobody's launch from a chroot = exit %d %q %s: want no claim", code, out, errs)
	}
	// The rest is served: the jailed user's own process is OWNED.
	own := exec.Command("sleep", "1000")
	own.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.Process.Kill(); own.Wait() })
	tok := tokenOf(t, own.Process.Pid)
	if code, out := runIn(t, "/supervisor", "/s.sock", asNobody, jailed, "verify", fmt.Sprint(own.Process.Pid), tok); code != 0 || !strings.HasPrefix(out, "OWNED") {
		t.Errorf("nobody's verify of its own process from a chroot = exit %d: %s; want OWNED", code, out)
	}
	code, out = runIn(t, "/supervisor", "/s.sock", nil, jailed, "launch", "--json", "--", "/bin/true")
	if code != 0 {
		t.Errorf("root's launch from a chroot = exit %d: %s; want it served", code, out)
	}
}

// TestIntegrationLaunchKeepsNoNewPrivs: a caller that cannot gain
// privileges by exec (no_new_privs, or a capability bounding set without
// what the daemon's has) got a workload that could: it ran setuid
// programs with the daemon's whole bounding set. The workload now has
// no_new_privs then, and the claim says so; a caller without either
// keeps its workload free of it, and root narrows its own.
func TestIntegrationLaunchKeepsNoNewPrivs(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		testenv.Skip(t, "no setpriv (util-linux)")
	}
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	asUser := []string{"--reuid", fmt.Sprint(nobody), "--regid", fmt.Sprint(nobody), "--clear-groups"}
	for _, tt := range []struct {
		name    string
		setpriv []string
		want    bool
	}{
		{"nobody", asUser, false},
		{"nobody with no_new_privs", append([]string{"--no-new-privs"}, asUser...), true},
		{"nobody without cap_sys_admin in its bounding set", append([]string{"--bounding-set", "-sys_admin"}, asUser...), true},
		{"root without cap_sys_admin in its bounding set", []string{"--bounding-set", "-sys_admin"}, false},
	} {
		args := append(tt.setpriv, binary(t), "launch", "--json", "--", "sleep", "1000")
		cmd := exec.Command("setpriv", args...)
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+sock)
		cmd.Dir = "/"
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: launch: %v: %s", tt.name, err, out)
		}
		var c struct {
			ID         string `json:"id"`
			Pid        int32  `json:"pid"`
			NoNewPrivs bool   `json:"no_new_privs"`
		}
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatalf("%s: %q: %v", tt.name, out, err)
		}
		t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", c.ID) })
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(string(status), "\nNoNewPrivs:\t1\n")
		if got != tt.want || c.NoNewPrivs != tt.want {
			t.Errorf("%s: workload no_new_privs %v, claim says %v; want %v", tt.name, got, c.NoNewPrivs, tt.want)
		}
	}
}
