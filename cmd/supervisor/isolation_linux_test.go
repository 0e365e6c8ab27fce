package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"golang.org/x/sys/unix"
)

// These tests check that a workload is its caller's, not the daemon's: its
// own session with no terminal, descriptors 0-2 only, the caller's groups
// and limits, argv[0] found with the caller's rights, and a daemon that is
// not root serving nobody but its own user.

// startDaemonWith starts the daemon through wrap (the command line before
// the daemon's own: "script", a setuid wrapper...), with extra descriptors,
// and returns a client and the daemon's pid; cleanup stops it.
func startDaemonWith(t *testing.T, cred *syscall.Credential, extra []*os.File, wrap []string, flags ...string) (*testDaemon, int) {
	t.Helper()
	state, sock := newDirs(t)
	if cred != nil {
		os.Chown(filepath.Dir(sock), int(cred.Uid), int(cred.Gid))
	}
	args := append([]string{binary(t), "run", "--state-dir", state, "--socket", sock,
		"--log-output", "file:" + filepath.Join(filepath.Dir(sock), "log.json"), "--grace", "1s"}, flags...)
	if len(wrap) > 0 {
		args = append(wrap, strings.Join(args, " "), "/dev/null")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{t: t, state: state, sock: sock, client: api.NewClient(sock), done: make(chan struct{})}
	// Up once it answers, even with a refusal (a daemon not root refuses
	// root); its pid comes from the socket's peer credentials.
	var pid int32
	testenv.EventuallyNil(t, 20*time.Second, func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err = d.client.Status(ctx); err != nil && !strings.Contains(err.Error(), "HTTP 403") {
			return err
		}
		pid, err = d.client.ServerPid(ctx)
		return err
	}, "daemon %v never answered", args)
	t.Cleanup(func() {
		// A stopping daemon leaves its claims running (a restart orphans
		// nothing): what the test launched is released first.
		d.releaseAll(t)
		syscall.Kill(int(pid), syscall.SIGTERM)
		testenv.Poll(10*time.Second, func() bool { return !alivePid(pid) })
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		removeClaimCgroups(state)
	})
	return d, int(pid)
}

// TestIntegrationWorkloadIsolated: the daemon runs with a controlling
// terminal (under script) and an inherited descriptor 3. A workload must
// get neither: it runs in a session of its own, without a terminal, with
// descriptors 0, 1 and 2 only. Before, a job could open /dev/tty, take the
// terminal's foreground and read root's keystrokes.
func TestIntegrationWorkloadIsolated(t *testing.T) {
	testenv.RequireRoot(t)
	leak, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	d, dpid := startDaemonWith(t, nil, []*os.File{leak}, []string{"script", "-qec"})
	var st procfs.Stat
	if err := procfs.NewReader("/proc").ReadStat(int32(dpid), &st); err != nil || st.TTY == 0 {
		t.Fatalf("the daemon under script has no terminal (tty %d, %v): the test proves nothing", st.TTY, err)
	}
	job := d.launch(t, "--detach", "--", "sh", "-c", "if (exec 3</dev/tty) 2>/dev/null; then echo has-tty; else echo no-tty; fi; ls /proc/self/fd")
	grant := d.launch(t, "--", "sleep", "100")
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(job.OutputPath)
		return strings.Count(string(b), "\n") >= 2
	}, "job wrote nothing")
	b, _ := os.ReadFile(job.OutputPath)
	out := string(b)
	if !strings.HasPrefix(out, "no-tty\n") {
		t.Errorf("a workload opened the daemon's terminal: %q", out)
	}
	// ls lists its own fds: 0, 1, 2 and the one it opened on the directory.
	if fds := strings.Fields(strings.SplitN(out, "\n", 2)[1]); len(fds) > 4 {
		t.Errorf("workload descriptors %v: want 0, 1, 2 (and ls's own)", fds)
	}
	if err := procfs.NewReader("/proc").ReadStat(grant.Pid, &st); err != nil {
		t.Fatal(err)
	}
	if st.Session != grant.Pid || st.TTY != 0 {
		t.Errorf("grant root %d: session %d, tty %d; want a session of its own and no terminal", grant.Pid, st.Session, st.TTY)
	}
	// sleep's loader holds its libraries a moment after the exec; a
	// descriptor leaked from the daemon would stay.
	var ents []os.DirEntry
	if !testenv.Poll(5*time.Second, func() bool {
		ents, err = os.ReadDir(fmt.Sprintf("/proc/%d/fd", grant.Pid))
		return err == nil && len(ents) == 3
	}) {
		t.Errorf("grant root has %d descriptors (%v), want 3", len(ents), err)
	}
}

// TestIntegrationWorkloadIdentityAndLimits: root asking for a uid without
// a gid gets the user's own group and groups, never root's; a uid the user
// database does not know needs a gid. A caller's lowered resource limits
// bind its workload, and the claim records them. A soft open-files limit
// reaches the workload as the shell set it, though the Go command that
// asks raised its own at start.
func TestIntegrationWorkloadIdentityAndLimits(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	uid := uint32(nobody)
	c, err := d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "100"}, Cwd: "/", UID: &uid})
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[0] == "Gid:" && f[1] != fmt.Sprint(nobody):
			t.Errorf("uid %d without a gid runs with %q, want its primary group %d", nobody, line, nobody)
		case len(f) > 0 && f[0] == "Groups:" && strings.Contains(" "+strings.Join(f[1:], " ")+" ", " 0 "):
			t.Errorf("uid %d without a gid runs with root's group: %q", nobody, line)
		}
	}
	unknown := uint32(4242424)
	if _, err := d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"true"}, Cwd: "/", UID: &unknown}); err == nil || !strings.Contains(err.Error(), "give its gid") {
		t.Errorf("launch as a uid the user database lacks = %v, want a refusal asking for its gid", err)
	}

	script := fmt.Sprintf("ulimit -c 0; ulimit -l 64; ulimit -p 200; ulimit -Sn 777; exec %s launch --json --detach -- sleep 100", binary(t))
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+sock)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("launch with lowered limits: %v", err)
	}
	var job api.Claim
	if err := json.Unmarshal(out, &job); err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", job.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"Max core file size": "0", "Max locked memory": "65536", "Max processes": "200", "Max open files": "777"} {
		for _, line := range strings.Split(string(limits), "\n") {
			if strings.HasPrefix(line, name) {
				if f := strings.Fields(strings.TrimPrefix(line, name)); len(f) < 2 || f[0] != want {
					t.Errorf("job's %s = %q, want its caller's %s", name, line, want)
				}
			}
		}
	}
	recorded := map[string]uint64{}
	for _, l := range job.Limits {
		recorded[l.Name] = l.Soft
	}
	if recorded["core"] != 0 || recorded["memlock"] != 65536 || recorded["nproc"] != 200 || recorded["nofile"] != 777 {
		t.Errorf("claim records limits %+v, want core 0, memlock 65536, nproc 200, nofile 777", job.Limits)
	}
}

// TestIntegrationLaunchPathOracle: argv[0] is found with the caller's own
// rights, so a program in a directory only root can search is "not found"
// to nobody exactly like one that exists nowhere; an exec that fails is
// reported as one.
func TestIntegrationLaunchPathOracle(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	secret := t.TempDir()
	os.Chmod(secret, 0o700)
	if err := os.WriteFile(filepath.Join(secret, "hidden-tool"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	try := func(name string) string {
		cmd := exec.Command(binary(t), "launch", "--json", "--", name)
		cmd.Env = []string{"SUPERVISOR_SOCKET=" + sock, "PATH=" + secret + ":/usr/bin:/bin"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
		out, _ := cmd.CombinedOutput()
		return strings.ReplaceAll(string(out), name, "NAME")
	}
	hidden, absent := try("hidden-tool"), try("absent-tool")
	if hidden != absent || !strings.Contains(hidden, "not found") {
		t.Errorf("launch of a program only root can find says %q, of one that is nowhere %q: want the same not found", hidden, absent)
	}
	if _, err := d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"/etc/hostname"}, Cwd: "/"}); err == nil || !strings.Contains(err.Error(), "exec failed") {
		t.Errorf("launch of a file that is not executable = %v, want exec failed", err)
	}
}

// TestIntegrationNonRootDaemonServesOnlyItsUser: a daemon running as
// nobody would run any caller's workload as nobody, so it refuses every
// other uid (root here) and serves nobody.
func TestIntegrationNonRootDaemonServesOnlyItsUser(t *testing.T) {
	testenv.RequireRoot(t)
	d, _ := startDaemonWith(t, asNobody, nil, nil, "--mechanism", "proc", "--cgroup", "off")
	if _, err := d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "100"}, Cwd: "/"}); err == nil || !strings.Contains(err.Error(), "acts for uid") {
		t.Errorf("root's launch through nobody's daemon = %v, want refused", err)
	}
	code, out, errs := d.run(t, asNobody, "launch", "--json", "--", "sleep", "100")
	if code != 0 {
		t.Fatalf("nobody's launch through its own daemon: exit %d: %s", code, errs)
	}
	var c api.Claim
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if ids, err := procfs.ReadUIDs("/proc", c.Pid); err != nil || ids.Real != nobody {
		t.Errorf("nobody's workload runs as %+v, %v", ids, err)
	}
	d.run(t, asNobody, "release", "--grace", "0s", c.ID)
}

// TestIntegrationEveryChildReaped: a job's children made with CLONE_PARENT
// are the daemon's children; it reaps them whatever the mechanism. Before,
// under netlink and /proc polling, they stayed zombies (a user could fill
// the pid space with them).
func TestIntegrationEveryChildReaped(t *testing.T) {
	testenv.RequireRoot(t)
	helper := testenv.CloneParent(t)
	for _, mech := range []string{"netlink", "proc"} {
		t.Run(mech, func(t *testing.T) {
			state, sock := newDirs(t)
			d := startDaemon(t, state, sock, "--mechanism", mech)
			st, err := d.client.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			job := d.launch(t, "--detach", "--", helper, "5")
			testenv.Eventually(t, 10*time.Second, func() bool {
				b, _ := os.ReadFile(job.OutputPath)
				return strings.Contains(string(b), "made 5")
			}, "the helper made no CLONE_PARENT children")
			testenv.Eventually(t, 20*time.Second, func() bool { return zombiesOf(int32(st.Pid)) == 0 },
				"the daemon (%s) left %d zombie children", mech, zombiesOf(int32(st.Pid)))
		})
	}
}

// zombiesOf counts the zombie children of pid.
func zombiesOf(pid int32) int {
	pids, _ := procfs.Pids("/proc")
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	n := 0
	for _, p := range pids {
		if r.ReadStat(p, &st) == nil && st.PPid == pid && st.Zombie() {
			n++
		}
	}
	return n
}

// TestIntegrationQuotas: one user cannot fill the store: its live claims
// and stored bytes are capped (a 429, not a store failure), its failed
// launches are kept only up to a small bound, and root's launch still
// works throughout.
func TestIntegrationQuotas(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody),
		"--quota-claims", "3", "--quota-bytes", "4096", "--quota-failed", "4")
	for i := range 3 {
		if code, _, errs := d.run(t, asNobody, "launch", "--json", "--", "sleep", "100"); code != 0 {
			t.Fatalf("nobody's launch %d within quota: exit %d: %s", i, code, errs)
		}
	}
	if code, _, errs := d.run(t, asNobody, "launch", "--json", "--", "sleep", "100"); code != 75 || !strings.Contains(errs, "quota") {
		t.Errorf("nobody's 4th live claim: exit %d %q, want 75, refused over quota", code, errs)
	}
	for i := range 20 {
		d.run(t, asNobody, "launch", "--json", "--", "/nonexistent/tool-"+fmt.Sprint(i))
	}
	list, err := d.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, c := range list {
		if c.UID == nobody && c.Pid == 0 {
			failed++
		}
	}
	if failed > 4 {
		t.Errorf("%d of nobody's failed launches kept, want at most 4", failed)
	}
	for _, c := range list {
		if c.UID == nobody && c.Pid != 0 {
			d.run(t, asNobody, "release", "--grace", "0s", c.ID)
		}
	}
	big := strings.Repeat("x", 2000)
	if code, _, errs := d.run(t, asNobody, "launch", "--json", "--", "true", big, big, big); code != 75 || !strings.Contains(errs, "quota") {
		t.Errorf("nobody's claim past its byte quota: exit %d %q, want 75, refused", code, errs)
	}
	if _, err := d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "100"}, Cwd: "/"}); err != nil {
		t.Errorf("root's launch while nobody is at its quotas: %v", err)
	}
}

// TestIntegrationQuotaConcurrent: a user's launches racing each other
// together stay within its claim quota (each checked against the others'
// records, not against the store as it was before any of them).
func TestIntegrationQuotaConcurrent(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--quota-claims", "3")
	const racers = 12
	codes := make(chan int, racers)
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			code, _, _ := d.run(t, asNobody, "launch", "--json", "--", "sleep", "100")
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	launched := 0
	for code := range codes {
		switch code {
		case 0:
			launched++
		case 75: // over quota
		default:
			t.Errorf("a racing launch exited %d, want 0 or 75", code)
		}
	}
	list, err := d.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, c := range list {
		if c.UID == nobody && c.Pid != 0 {
			live++
			d.run(t, asNobody, "release", "--grace", "0s", c.ID)
		}
	}
	if launched != 3 || live != 3 {
		t.Errorf("%d racing launches with a quota of 3: %d launched, %d live claims; want 3 and 3", racers, launched, live)
	}
}

// TestIntegrationRefusalsAreSaid: a user the daemon's socket refuses is
// told so (and about --socket-group), with no local teardown behind its
// back; a local kill of another user's process says it is not permitted
// instead of reporting a survivor after a grace period.
func TestIntegrationRefusalsAreSaid(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	startDaemon(t, state, sock) // no --socket-group: root only
	victim := testenv.Start(t, "sleep", "100")
	tok := tokenOf(t, victim.Process.Pid)
	run := func(sockPath string) (int, string) {
		cmd := exec.Command(binary(t), "kill", fmt.Sprint(victim.Process.Pid), tok, "--grace", "30s")
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+sockPath)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, string(out)
	}
	if code, out := run(sock); code != exitNoPerm || !strings.Contains(out, "socket-group") {
		t.Errorf("nobody's kill through a socket it may not use: exit %d %q, want %d naming --socket-group", code, out, exitNoPerm)
	}
	if code, out := run(filepath.Join(t.TempDir(), "none.sock")); code != client.ExitForeign || !strings.Contains(out, "not permitted") {
		t.Errorf("nobody's local kill of root's process: exit %d %q, want %d saying it is not permitted", code, out, client.ExitForeign)
	}
	if !owned(int32(victim.Process.Pid), tok) {
		t.Error("root's process was signalled for nobody")
	}
}

// TestIntegrationListPages: the claim list comes in pages (a limit and a
// cursor) with filters, and a non-root caller sees only its own claims
// whatever it asks.
func TestIntegrationListPages(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	for i := range 5 {
		d.launch(t, "--owner", fmt.Sprintf("o%d", i%2), "--", "sleep", "100")
	}
	ctx := context.Background()
	var all []api.Claim
	q := api.ListQuery{Limit: 2}
	pages := 0
	for {
		page, next, err := d.client.ListPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > 2 {
			t.Fatalf("page of %d claims, limit 2", len(page))
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		q.After = next
	}
	if len(all) != 5 || pages != 3 {
		t.Errorf("paged through %d claims in %d pages, want 5 in 3", len(all), pages)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].ID >= all[i].ID {
			t.Errorf("claims out of id order: %s before %s", all[i-1].ID, all[i].ID)
		}
	}
	o1, _, err := d.client.ListPage(ctx, api.ListQuery{Owner: "o1", State: "running"})
	if err != nil || len(o1) != 2 {
		t.Errorf("owner o1, running: %d claims, %v; want 2", len(o1), err)
	}
	code, out, errs := d.run(t, asNobody, "list", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("nobody's list: exit %d %q %s, want an empty list", code, out, errs)
	}
}

// failLaunchEnv makes the test binary launch N programs that do not exist
// through the socket, 8 at a time, as whoever runs it.
const failLaunchEnv = "SUPERVISOR_TEST_FAIL_LAUNCHES"

func init() {
	v := os.Getenv(failLaunchEnv)
	if v == "" {
		return
	}
	sock, n, _ := strings.Cut(v, ",")
	count, _ := strconv.Atoi(n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := api.NewClient(sock)
			defer c.Close()
			for i := range next {
				argv := []string{"/nonexistent/tool-" + strconv.Itoa(i), strings.Repeat("x", 4000)}
				c.Launch(context.Background(), &api.LaunchRequest{Argv: argv, Cwd: "/"})
			}
		}()
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	os.Exit(0)
}

// TestIntegrationFailedLaunchFlood: one user's 5,000 failing launches (4 KB
// of argv each) keep the store bounded, and root's launch works meanwhile.
// Before, every failed launch was kept with its argv, and a minute of it
// filled the store for everyone.
func TestIntegrationFailedLaunchFlood(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--rate-per-uid", "100000", "--burst-per-uid", "100000")
	// A copy of this test binary floods as nobody.
	flood := testenv.SelfAs(t, asNobody, []string{failLaunchEnv + "=" + sock + ",5000"}, "-test.run=^$")
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- flood.Wait() }()
	testenv.Eventually(t, 30*time.Second, func() bool {
		cs, err := d.client.List(context.Background())
		return err == nil && len(cs) > 0
	}, "the flood never started")
	if _, err := d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "100"}, Cwd: "/"}); err != nil {
		t.Errorf("root's launch during the flood: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("flood: %v", err)
		}
	case <-time.After(10 * time.Minute):
		t.Fatal("the flood did not end")
	}
	cs, err := d.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, c := range cs {
		if c.UID == nobody {
			kept++
		}
	}
	if kept > daemon.DefaultQuotaFailed {
		t.Errorf("%d of nobody's failed launches kept, want at most %d", kept, daemon.DefaultQuotaFailed)
	}
	if fi, err := os.Stat(filepath.Join(state, "claims.db")); err != nil || fi.Size() > 32<<20 {
		t.Errorf("store after the flood: %v bytes, %v; want it bounded", fi.Size(), err)
	}
}

// TestIntegrationAuditTrail replays a short session and checks that each
// request that changes something left one line naming who asked (uid and
// pid from the socket), the claim, and what came of it, refusals included.
func TestIntegrationAuditTrail(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	code, out, errs := d.run(t, asNobody, "launch", "--json", "--owner", "audit-me", "--", "sleep", "100")
	if code != 0 {
		t.Fatalf("nobody's launch: exit %d: %s", code, errs)
	}
	var mine api.Claim
	if err := json.Unmarshal([]byte(out), &mine); err != nil {
		t.Fatal(err)
	}
	roots := d.launch(t, "--", "sleep", "100")
	d.run(t, asNobody, "release", roots.ID) // refused: root's claim
	d.run(t, asNobody, "release", "--grace", "0s", mine.ID)
	d.run(t, nil, "kill", fmt.Sprint(roots.Pid), roots.Token.String(), "--grace", "0s")
	d.run(t, nil, "reap")

	type line struct {
		Event struct{ Action, Outcome string }
		User  struct{ ID string }
		Super struct {
			Requester struct{ Pid int32 }
			Claim     struct{ ID, Owner string }
		} `json:"supervisor"`
		Process struct {
			Args []string
			User struct{ ID string }
		}
	}
	want := []struct {
		action, outcome, uid, claim string
	}{
		{"launch_requested", "success", fmt.Sprint(nobody), mine.ID},
		{"launch_requested", "success", "0", roots.ID},
		{"release_requested", "failure", fmt.Sprint(nobody), roots.ID},
		{"release_requested", "success", fmt.Sprint(nobody), mine.ID},
		{"kill_requested", "success", "0", roots.ID},
		{"reap_requested", "success", "0", ""},
	}
	testenv.EventuallyNil(t, 10*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(sock), "log.json"))
		if err != nil {
			return err
		}
		var got []line
		for _, l := range strings.Split(string(b), "\n") {
			var x line
			if json.Unmarshal([]byte(l), &x) == nil && strings.HasSuffix(x.Event.Action, "_requested") {
				got = append(got, x)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d request lines, want %d: %+v", len(got), len(want), got)
		}
		for i, w := range want {
			g := got[i]
			if g.Event.Action != w.action || g.Event.Outcome != w.outcome || g.User.ID != w.uid || g.Super.Claim.ID != w.claim || g.Super.Requester.Pid == 0 {
				return fmt.Errorf("line %d = %+v, want %s %s by uid %s on %q with the requester's pid", i, g, w.action, w.outcome, w.uid, w.claim)
			}
		}
		if got[0].Process.User.ID != fmt.Sprint(nobody) || got[0].Super.Claim.Owner != "audit-me" || len(got[0].Process.Args) != 2 {
			return fmt.Errorf("nobody's launch line %+v: want its argv, owner and the uid it runs as", got[0])
		}
		return nil
	}, "the audit trail is not the session's")
}

// TestIntegrationClaimLines: what happens to a claim reaches the feed: a
// job's exit with its code, a wall clock running out, and every state
// change from and to.
func TestIntegrationClaimLines(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	job := d.launch(t, "--detach", "--", "sh", "-c", "exit 3")
	timed := d.launch(t, "--wall-clock", "1s", "--", "sleep", "100")
	type line struct {
		Event   struct{ Action string }
		Process struct {
			ExitCode *int `json:"exit_code"`
		}
		Super struct {
			Claim struct {
				ID, State     string
				PreviousState string `json:"previous_state"`
			} `json:"claim"`
		} `json:"supervisor"`
	}
	testenv.EventuallyNil(t, 20*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(sock), "log.json"))
		if err != nil {
			return err
		}
		var exited, expired bool
		changes := map[string][]string{}
		for _, l := range strings.Split(string(b), "\n") {
			var x line
			if json.Unmarshal([]byte(l), &x) != nil {
				continue
			}
			c := x.Super.Claim
			switch x.Event.Action {
			case "job_exited":
				exited = exited || c.ID == job.ID && x.Process.ExitCode != nil && *x.Process.ExitCode == 3
			case "wall_clock_expired":
				expired = expired || c.ID == timed.ID
			case "claim_state_changed":
				changes[c.ID] = append(changes[c.ID], c.PreviousState+">"+c.State)
			}
		}
		if !exited || !expired {
			return fmt.Errorf("job_exited with code 3: %v; wall_clock_expired: %v", exited, expired)
		}
		if got := strings.Join(changes[timed.ID], " "); !strings.Contains(got, "running>releasing") || !strings.Contains(got, "releasing>released") {
			return fmt.Errorf("state changes of %s: %q, want running>releasing and releasing>released", timed.ID, got)
		}
		if got := strings.Join(changes[job.ID], " "); !strings.Contains(got, "running>exited") {
			return fmt.Errorf("state changes of %s: %q, want running>exited", job.ID, got)
		}
		return nil
	}, "claim lines missing")
}

// TestIntegrationJobCgroupRemoved: a job's cgroup is removed once the job
// has exited and nothing is left in it. Before, every job left an empty
// cgroup directory behind (1,623 under this VM's after a day of tests).
func TestIntegrationJobCgroupRemoved(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	job := d.launch(t, "--detach", "--", "true")
	if job.Cgroup == "" {
		testenv.Skip(t, "the daemon made no cgroup for %s here", job.ID)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(job.Cgroup)
		return errors.Is(err, os.ErrNotExist)
	}, "job %s exited, and its cgroup %s stayed", job.ID, job.Cgroup)
}

// TestIntegrationJobCgroupRemovedAfterItsMembers: a job whose child
// outlives it keeps its cgroup while the child runs; the reaper's next
// pass after the child has gone removes it.
func TestIntegrationJobCgroupRemovedAfterItsMembers(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--reap-interval", "500ms")
	job := d.launch(t, "--detach", "--", "sh", "-c", "sleep 1000 & echo $!; exit 0")
	if job.Cgroup == "" {
		testenv.Skip(t, "the daemon made no cgroup for %s here", job.ID)
	}
	var child int
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(job.OutputPath)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		child = n
		return err == nil && n > 0
	}, "job %s never said its child's pid", job.ID)
	killed := false
	t.Cleanup(func() {
		if !killed { // a pid this test has not ended is still the child's
			syscall.Kill(child, syscall.SIGKILL)
		}
	})
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", job.Pid))
		return errors.Is(err, os.ErrNotExist)
	}, "job %s's root %d never went", job.ID, job.Pid)
	// Passes of the reaper (every 500 ms) after the root has gone: the
	// child, which runs until it is killed, holds the cgroup.
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(job.Cgroup); err != nil {
		t.Fatalf("job %s's cgroup %s went while its child ran: %v", job.ID, job.Cgroup, err)
	}
	killed = true
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, func() bool {
		_, err := os.Stat(job.Cgroup)
		return errors.Is(err, os.ErrNotExist)
	}, "job %s's child has gone, and its cgroup %s stayed", job.ID, job.Cgroup)
}

// TestIntegrationClaimCgroupRootsOnly: a claim's cgroup, and the list of
// claims' cgroups, are root's to read: nobody cannot list the claims nor
// read the pids of another claim's cgroup (under hidepid those are pids
// /proc hides). Before, both were world-readable.
func TestIntegrationClaimCgroupRootsOnly(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	c := d.launch(t, "--", "sleep", "1000")
	t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", c.ID) })
	if c.Cgroup == "" {
		testenv.Skip(t, "the daemon made no cgroup for %s here", c.ID)
	}
	for _, p := range []string{filepath.Join(c.Cgroup, "cgroup.procs"), filepath.Dir(c.Cgroup)} {
		cmd := exec.Command("ls", p)
		if strings.HasSuffix(p, ".procs") {
			cmd = exec.Command("cat", p)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("nobody read %s: %q", p, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(c.Cgroup, "cgroup.procs")); err != nil || !strings.Contains(string(b), fmt.Sprint(c.Pid)) {
		t.Errorf("root's read of %s: %q, %v; want the claim's pid %d", c.Cgroup, b, err, c.Pid)
	}
}

// TestIntegrationWorkloadSessionKeyring: the daemon runs with a session
// keyring of its own, holding a key (as systemd starts a service, with a
// private keyring). No workload may possess it: each gets a new one, so
// nobody's workloads neither see the daemon's key nor share a keyring with
// each other. Before, every workload kept the daemon's session keyring, and
// one user's workload read another's keys.
func TestIntegrationWorkloadSessionKeyring(t *testing.T) {
	testenv.RequireRoot(t)
	const secret = "supervisor-test-daemon-key"
	// The daemon is forked from a thread with a new session keyring
	// holding the key; the thread is never unlocked, so it ends with
	// its goroutine and takes the keyring with it.
	onKeyringThread := func(cmd *exec.Cmd) error {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
				errc <- fmt.Errorf("keyctl join: %w", e)
				return
			}
			if _, err := unix.AddKey("user", secret, []byte("daemon's"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
				errc <- fmt.Errorf("add_key: %w", err)
				return
			}
			errc <- cmd.Start()
		}()
		return <-errc
	}
	state, sock := newDirs(t)
	d := startDaemonBy(t, onKeyringThread, state, sock, "--socket-group", strconv.Itoa(nobody))

	// Each workload prints the keyrings and keys it may see, and waits,
	// so that both live at once.
	keys := func() (string, api.Claim) {
		code, out, errs := d.run(t, asNobody, "launch", "--detach", "--json", "--cwd", "/", "--",
			"sh", "-c", "cat /proc/keys; echo end; exec sleep 1000")
		if code != 0 {
			t.Fatalf("launch as nobody: exit %d %s %s", code, out, errs)
		}
		var job api.Claim
		if err := json.Unmarshal([]byte(out), &job); err != nil {
			t.Fatalf("launch --json printed %q: %v", out, err)
		}
		t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", job.ID) })
		var got string
		testenv.Eventually(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile(job.OutputPath)
			got = string(b)
			return strings.HasSuffix(got, "end\n")
		}, "job %s never listed its keys", job.ID)
		return got, job
	}
	first, a := keys()
	second, b := keys()
	session := func(list string, job api.Claim) string {
		var ids []string
		for _, l := range strings.Split(list, "\n") {
			if strings.Contains(l, secret) {
				t.Errorf("nobody's job %s sees the daemon's key: %s", job.ID, l)
			}
			if f := strings.Fields(l); len(f) >= 9 && f[7] == "keyring" && f[8] == "_ses:" {
				ids = append(ids, f[0])
			}
		}
		if len(ids) != 1 {
			t.Fatalf("nobody's job %s sees %d session keyrings, want its own alone:\n%s", job.ID, len(ids), list)
		}
		return ids[0]
	}
	if ka, kb := session(first, a), session(second, b); ka == kb {
		t.Errorf("nobody's two jobs share session keyring %s", ka)
	}
}
