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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// TestIntegrationLaunchInCallersRoot: a workload runs in its caller's
// root directory, so that a user root confined to a chroot, a read-only
// bind mount of /, or a mount namespace that hides a directory, does not
// launch its way out of it. Each ran in the daemon's root before: the job
// wrote where its caller could not and read what was hidden from it.
func TestIntegrationLaunchInCallersRoot(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	base := filepath.Dir(sock)
	// job launches a job as cred with attr's root or namespaces (through
	// wrap, a shell command that ends by running the client) and returns
	// how it ended and its output.
	job := func(name string, cred *syscall.Credential, attr *syscall.SysProcAttr, bin, sock string, argv ...string) (string, string) {
		t.Helper()
		code, out := runIn(t, bin, sock, cred, attr, append([]string{"launch", "--detach", "--json", "--cwd", "/", "--"}, argv...)...)
		if code != 0 {
			t.Fatalf("%s: launch: exit %d: %s", name, code, out)
		}
		var c struct{ ID string }
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("%s: %q: %v", name, out, err)
		}
		_, ended, _ := d.run(t, nil, "wait", "--timeout", "20s", c.ID)
		_, output, _ := d.run(t, nil, "output", c.ID)
		return strings.TrimSpace(ended), output
	}

	// A chroot holding nothing but a static build of the client and a
	// link to the socket.
	jail := filepath.Join(base, "jail")
	if err := os.Mkdir(jail, 0o755); err != nil {
		t.Fatal(err)
	}
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
	for _, who := range []struct {
		name string
		cred *syscall.Credential
	}{{"nobody", asNobody}, {"root", nil}} {
		ended, out := job(who.name+" in a chroot", who.cred, jailed, "/supervisor", "/s.sock", "/supervisor", "version")
		if !strings.Contains(ended, "exited (0)") || !strings.Contains(out, "supervisor") {
			t.Errorf("%s's job from a chroot running the chroot's /supervisor: %s, output %q; want it run there", who.name, ended, out)
		}
		code, out := runIn(t, "/supervisor", "/s.sock", who.cred, jailed, "launch", "--cwd", "/", "--", "/bin/true")
		if code == 0 || !strings.Contains(out, "exec failed") {
			t.Errorf("%s's launch from a chroot of the host's /bin/true: exit %d: %s; want it not found there", who.name, code, out)
		}
	}

	// A read-only bind mount of / in a mount namespace of its own, and a
	// directory the same namespace hides under a tmpfs.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	secret := filepath.Join(base, "secret")
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "flag"), []byte("hidden-from-the-sandbox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(base, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	setup := fmt.Sprintf("mount --make-rprivate / && mount --bind / %[1]s && mount -o remount,bind,ro %[1]s && mount -t tmpfs none %[1]s%[2]s && exec chroot --userspec=%[3]d:%[3]d %[1]s \"$@\"", ro, secret, nobody)
	sandboxed := func(argv ...string) (string, string) {
		t.Helper()
		// The sandbox goes at once: its job holds its mount namespace
		// (a private namespace's mounts went with its last process, and a
		// job that outlived it saw what they had covered).
		inner := `exec "$0" launch --detach --json --cwd / -- "$@"`
		wrapped := append([]string{"unshare", "-m", "sh", "-c", setup, "sh", "/bin/sh", "-c", inner, binary(t)}, argv...)
		cmd := exec.Command(wrapped[0], wrapped[1:]...)
		cmd.Env = []string{"SUPERVISOR_SOCKET=" + sock, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("launch from the sandbox: %v: %s%s", err, out, errb.String())
		}
		var c struct{ ID string }
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		_, ended, _ := d.run(t, nil, "wait", "--timeout", "20s", c.ID)
		_, output, _ := d.run(t, nil, "output", c.ID)
		return strings.TrimSpace(ended), output
	}
	escaped := filepath.Join(open, "escaped")
	ended, out := sandboxed("touch", escaped)
	if _, err := os.Stat(escaped); err == nil || strings.Contains(ended, "exited (0)") {
		t.Errorf("a job launched from a read-only bind mount of / wrote %s: %s %q", escaped, ended, out)
	}
	ended, out = sandboxed("sh", "-c", `sleep 1; cat "$0"`, filepath.Join(secret, "flag"))
	if strings.Contains(out, "hidden-from-the-sandbox") || strings.Contains(ended, "exited (0)") {
		t.Errorf("a job launched from a mount namespace that hides %s read it: %s %q", secret, ended, out)
	}
	// The same user from the daemon's root writes and reads both.
	if _, out := job("nobody", asNobody, &syscall.SysProcAttr{}, binary(t), sock, "cat", filepath.Join(secret, "flag")); !strings.Contains(out, "hidden-from-the-sandbox") {
		t.Errorf("nobody's job from the daemon's root could not read %s: %q", secret, out)
	}
}

// TestIntegrationLaunchInCallersNamespaces: a user root placed in network,
// IPC and UTS namespaces of their own (PrivateNetwork=, PrivateIPC=, a
// sandbox's) gets a workload in them. It ran in the daemon's before: with
// the host's network interfaces, IPC objects and host name.
func TestIntegrationLaunchInCallersNamespaces(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "no %s (util-linux)", tool)
		}
	}
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	seen := filepath.Join(filepath.Dir(sock), "callers-namespaces")
	const show = "hostname; readlink /proc/self/ns/net /proc/self/ns/ipc /proc/self/ns/uts"
	script := `hostname callers-box && { ` + show + `; } >"$1" && exec setpriv --reuid=` + fmt.Sprint(nobody) +
		` --regid=` + fmt.Sprint(nobody) + ` --clear-groups "$0" launch --detach --json --cwd / -- sh -c "$2"`
	cmd := exec.Command("unshare", "-n", "-i", "-u", "sh", "-c", script, binary(t), seen, show)
	cmd.Env = []string{"SUPERVISOR_SOCKET=" + sock, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("launch from the namespaces: %v: %s%s", err, out, errb.String())
	}
	var c struct{ ID string }
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	_, ended, _ := d.run(t, nil, "wait", "--timeout", "20s", c.ID)
	_, output, _ := d.run(t, nil, "output", c.ID)
	callers, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := os.Readlink("/proc/self/ns/net")
	if strings.Contains(string(callers), own) {
		t.Fatalf("the caller's namespaces %q include the test's network namespace %s", callers, own)
	}
	if !strings.Contains(ended, "exited (0)") || output != string(callers) {
		t.Errorf("job of a caller in namespaces of its own: %s, said %q; want its caller's %q", strings.TrimSpace(ended), output, callers)
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
	for _, tool := range []string{"setpriv", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "no %s (util-linux)", tool)
		}
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
		// Namespaces of its own, made in a user namespace of its own:
		// a setuid program run there as root would trust a host name,
		// network and IPC objects nobody controls.
		{"nobody in network, IPC and UTS namespaces of its own", append(append([]string{}, asUser...), "unshare", "-Urun"), true},
	} {
		args := append(tt.setpriv, binary(t), "launch", "--json", "--", "sleep", "1000")
		cmd := exec.Command("setpriv", args...)
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+sock)
		cmd.Dir = "/"
		c := launchedBy(t, tt.name, cmd)
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

// TestIntegrationLaunchElsewhereNoSetuid: a workload started in the root
// of a caller in a mount namespace of its own still reaches the daemon's
// mounts through /proc/PID/root of a process of its uid, where a setuid
// program keeps its bit; its loader and files are then looked up in the
// caller's tree, which the caller may write (an audit's tmpfs root with
// its own ld-linux became root in full). Such a workload gets
// no_new_privs: the setuid helper run that way stays nobody's. From the
// daemon's own root and namespace the same launch runs it as root, as
// the user could itself.
func TestIntegrationLaunchElsewhereNoSetuid(t *testing.T) {
	testenv.RequireRoot(t)
	helper := testenv.SetuidRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	host := exec.Command("sleep", "1000")
	host.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	through := fmt.Sprintf("/proc/%d/root%s", host.Process.Pid, helper)
	rootDir := filepath.Join(filepath.Dir(sock), "r")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		wrap      []string
		elsewhere bool
	}{
		{"from the daemon's root", nil, false},
		{"from a mount namespace and root of its own", []string{"unshare", "-Urm", "sh", "-c",
			fmt.Sprintf("mount --rbind / %[1]s && exec chroot %[1]s \"$@\"", rootDir), "sh"}, true},
	} {
		argv := append(append(tt.wrap, binary(t), "launch", "--json", "--cwd", "/", "--"), through, "hold")
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"SUPERVISOR_SOCKET=" + sock, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
		c := launchedBy(t, tt.name, cmd)
		// The helper that became root in full is no longer nobody's to
		// signal, nor the release's acting for nobody: the test kills it.
		t.Cleanup(func() { syscall.Kill(int(c.Pid), syscall.SIGKILL); d.run(t, nil, "release", "--grace", "0s", c.ID) })
		root := testenv.Poll(3*time.Second, func() bool { return uidOf(c.Pid) == 0 })
		if root == tt.elsewhere || c.NoNewPrivs != tt.elsewhere {
			t.Errorf("%s: the setuid helper through %s became root: %v, claim no_new_privs %v; want root %v", tt.name, through, root, c.NoNewPrivs, !tt.elsewhere)
		}
	}
}

// launched is what the tests here read of a claim `launch --json` printed.
type launched struct {
	ID         string `json:"id"`
	Pid        int32  `json:"pid"`
	NoNewPrivs bool   `json:"no_new_privs"`
}

// launchedBy runs cmd, a `launch --json` through some wrapper, and returns
// the claim it printed.
func launchedBy(t *testing.T, name string, cmd *exec.Cmd) launched {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: launch: %v: %s", name, err, out)
	}
	var c launched
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("%s: %q: %v", name, out, err)
	}
	return c
}

// TestIntegrationTokenInTimeNamespace: `token` run in a time namespace
// whose boot clock is set ahead (unshare --time --boottime) prints the
// token the host sees: /proc shows it start times with the namespace's
// offset added, and a token read from them named no process (a review's
// `launch --bind-to-caller` there was refused as FOREIGN, and `verify` of
// the caller's own shell said FOREIGN).
func TestIntegrationTokenInTimeNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Skip(t, "unshare (util-linux) is not installed")
	}
	if _, err := os.Stat("/proc/self/timens_offsets"); err != nil {
		testenv.Skip(t, "no time namespaces here: %v", err)
	}
	bin := binary(t)
	pid := strconv.Itoa(os.Getpid())
	host, err := exec.Command(bin, "token", pid).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, offset := range []string{"100000", "-100"} {
		in, err := exec.Command("unshare", "--time", "--boottime", offset, bin, "token", pid).CombinedOutput()
		if err != nil {
			t.Fatalf("token in a time namespace %s s ahead: %v: %s", offset, err, in)
		}
		if string(in) != string(host) {
			t.Errorf("token in a time namespace %s s ahead = %q, the host's %q", offset, in, host)
		}
	}
	// An offset of 7 ms (unshare takes whole seconds; CRIU restores
	// with any): no start time can be read exactly, so no token is
	// printed, rather than one a tick off (a review's verify of its own
	// shell said FOREIGN, 6 times in 8).
	helper := exec.Command(os.Args[0])
	helper.Env = append(os.Environ(), "SUPERVISOR_TIMENS_HELPER=boottime 0 7000000", "SUPERVISOR_TIMENS_RUN="+bin+" token "+pid)
	out, err := helper.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot be read exactly in this time namespace") {
		t.Errorf("token in a time namespace 7 ms ahead: %v: %s; want a refusal", err, out)
	}
	// The daemon does not start there: every claim would be UNVERIFIABLE.
	state := t.TempDir()
	helper = exec.Command(os.Args[0])
	helper.Env = append(os.Environ(), "SUPERVISOR_TIMENS_HELPER=boottime 0 7000000",
		"SUPERVISOR_TIMENS_RUN="+bin+" run --state-dir "+state+" --socket "+filepath.Join(state, "api.sock")+" --cgroup off")
	out, err = helper.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot be read exactly in this time namespace") {
		t.Errorf("run in a time namespace 7 ms ahead: %v: %s; want a refusal to start", err, out)
	}
}

// timensHelper is TestIntegrationTokenInTimeNamespace's: the test binary
// run with SUPERVISOR_TIMENS_HELPER set (TestMain) makes a time namespace
// for its children with those offsets and runs SUPERVISOR_TIMENS_RUN in
// it, exiting with its exit code.
func timensHelper(offsets string) {
	if err := unix.Unshare(unix.CLONE_NEWTIME); err != nil {
		fmt.Println("unshare CLONE_NEWTIME:", err)
		os.Exit(2)
	}
	if err := os.WriteFile("/proc/self/timens_offsets", []byte(offsets+"\n"), 0); err != nil {
		fmt.Println("timens_offsets:", err)
		os.Exit(2)
	}
	args := strings.Fields(os.Getenv("SUPERVISOR_TIMENS_RUN"))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Println(err)
		os.Exit(2)
	}
	os.Exit(0)
}
