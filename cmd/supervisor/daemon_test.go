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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds the supervisor command once per test binary, into the
// build directory every user can read (the abuse test runs it as nobody),
// which TestMain removes.
func binary(t testing.TB) string {
	t.Helper()
	dir := testenv.BuildDir(t)
	binOnce.Do(func() {
		binPath = filepath.Join(dir, "supervisor")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type testDaemon struct {
	t      testing.TB
	state  string
	sock   string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
	client *api.Client
}

// newDirs returns a state dir and a socket path in a fresh directory that
// other users may traverse.
func newDirs(t testing.TB) (string, string) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	return filepath.Join(dir, "state"), filepath.Join(dir, "s.sock")
}

func startDaemon(t testing.TB, state, sock string, extra ...string) *testDaemon {
	t.Helper()
	return startDaemonBy(t, (*exec.Cmd).Start, state, sock, extra...)
}

// startDaemonBy is startDaemon with the daemon's process started by start.
func startDaemonBy(t testing.TB, start func(*exec.Cmd) error, state, sock string, extra ...string) *testDaemon {
	t.Helper()
	d := &testDaemon{t: t, state: state, sock: sock, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	args := append([]string{"run", "--state-dir", state, "--socket", sock,
		"--log-output", "file:" + filepath.Join(filepath.Dir(sock), "log.json"),
		"--grace", "1s", "--reap-interval", "1s"}, extra...)
	d.cmd = exec.Command(binary(t), args...)
	d.cmd.Stderr = d.stderr
	if err := start(d.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	d.client = api.NewClient(sock)
	// Tear down what the test left running (a no-op on a daemon already
	// stopped), then stop it.
	t.Cleanup(func() { d.releaseAll(t); d.kill9(); removeClaimCgroups(state) })
	testenv.EventuallyNil(t, 20*time.Second, func() error {
		select {
		case <-d.done:
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, d.stderr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := d.client.Status(ctx)
		return err
	}, "daemon not serving\n%s", d.stderr)
	return d
}

// removeClaimCgroups removes the cgroups the claims stored in state
// recorded, where they are empty, once the daemon that made them has
// stopped: its next reap pass would have, and without this every test run
// left its claims' cgroups in the host's hierarchy. A cgroup that still
// holds a process stays (rmdir refuses it).
func removeClaimCgroups(state string) {
	st, err := store.Open(filepath.Join(state, "claims.db"), store.Options{LockTimeout: time.Second})
	if err != nil {
		return // no store, or another daemon holds it
	}
	defer st.Close()
	cs, err := st.List(store.Filter{})
	if err != nil {
		return
	}
	for _, c := range cs {
		if c.Cgroup != "" && filepath.Base(c.Cgroup) == c.ID {
			os.Remove(c.Cgroup)
		}
	}
}

func (d *testDaemon) kill9() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d.client.Close()
}

func (d *testDaemon) term() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		d.t.Errorf("daemon did not stop on SIGTERM\n%s", d.stderr)
		d.kill9()
	}
}

// run runs the CLI against the daemon's socket.
func (d *testDaemon) run(t testing.TB, cred *syscall.Credential, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
	cmd.Dir = "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func (d *testDaemon) launch(t testing.TB, args ...string) api.Claim {
	t.Helper()
	code, out, errs := d.run(t, nil, append([]string{"launch", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("launch %q: exit %d: %s", args, code, errs)
	}
	var c api.Claim
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("launch output %q: %v", out, err)
	}
	return c
}

func (d *testDaemon) claim(t testing.TB, id string) api.Claim {
	t.Helper()
	c, err := d.client.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v\n%s", id, err, d.stderr)
	}
	return c
}

// releaseAll tears down what a test left running.
func (d *testDaemon) releaseAll(t testing.TB) {
	select {
	case <-d.done:
		return
	default:
	}
	cs, err := d.client.List(context.Background())
	if err != nil {
		return
	}
	zero := api.Duration(0)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, c := range cs {
		if c.State == store.Running || c.State == store.Unverifiable {
			wg.Add(1)
			sem <- struct{}{}
			go func(id string) {
				defer func() { <-sem; wg.Done() }()
				d.client.Release(context.Background(), id, &api.ReleaseRequest{Grace: &zero})
			}(c.ID)
		}
	}
	wg.Wait()
}

var judge = sync.OnceValue(func() *verdict.Judge {
	j, err := verdict.New()
	if err != nil {
		panic(err)
	}
	return j
})

// owned judges (pid, tok) locally; tok is a token or its text.
func owned[T string | token.Token](pid int32, tok T) bool {
	var t token.Token
	switch v := any(tok).(type) {
	case token.Token:
		t = v
	case string:
		var err error
		if t, err = token.Parse(v); err != nil {
			return false
		}
	}
	return judge().Judge(pid, t).Result == verdict.Owned
}

// holderShell starts a shell that runs the CLI's launch with
// --bind-to-caller (so the shell is the holder) and then waits; the claim
// JSON goes to a file.
func holderShell(t testing.TB, d *testDaemon, stay string, argv ...string) (*exec.Cmd, api.Claim) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "claim.json")
	script := fmt.Sprintf("%q launch --json --bind-to-caller -- %s > %q; %s", binary(t), strings.Join(argv, " "), out, stay)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var c api.Claim
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(out)
		return err == nil && json.Unmarshal(b, &c) == nil && c.ID != ""
	}, "holder's launch wrote no claim\n%s", d.stderr)
	return cmd, c
}

// doubleFork is a grant whose root waits while a grandchild, double-forked
// away, sleeps under init (or the daemon as subreaper). The grandchild
// writes its pid to a file.
func doubleFork(pidFile string) []string {
	return []string{"sh", "-c", fmt.Sprintf("'(sh -c \"sleep 1000 & echo \\$! > %s; exit 0\" &); exec sleep 1000'", pidFile)}
}

func readPid(t testing.TB, path string) (int32, string) {
	t.Helper()
	var pid int
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, "no pid in %s", path)
	return int32(pid), tokenOf(t.(*testing.T), pid)
}

func TestIntegrationDaemonRestart(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	tmp := t.TempDir()

	// A: bound to a holder that ends while the daemon is down; its tree
	// includes a double-forked grandchild.
	gcFile := filepath.Join(tmp, "gc")
	holderA, a := holderShell(t, d, "exec sleep 1000", doubleFork(gcFile)...)
	gcPid, gcTok := readPid(t, gcFile)
	// B: bound to a holder that stays. C: unbound. J: a job.
	_, b := holderShell(t, d, "exec sleep 1000", "sleep", "1000")
	c := d.launch(t, "--", "sleep", "1000")
	j := d.launch(t, "--detach", "--", "sh", "-c", "echo started; exec sleep 1000")
	// The grandchild must be recorded before the crash.
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, m := range d.claim(t, a.ID).Members {
			if m.Pid == gcPid {
				return true
			}
		}
		return false
	}, "grandchild %d never recorded as a member of %s", gcPid, a.ID)

	d.kill9()
	holderA.Process.Kill()
	holderA.Wait()
	d = startDaemon(t, state, sock)

	// The reconcile before serving starts the orphan's teardown in a
	// worker; the daemon serves meanwhile.
	if !testenv.Poll(15*time.Second, func() bool { return d.claim(t, a.ID).State == store.Released }) {
		t.Errorf("orphan %s state = %s, want released", a.ID, d.claim(t, a.ID).State)
	}
	for _, p := range []struct {
		name string
		pid  int32
		tok  string
	}{{"orphan root", a.Pid, a.Token.String()}, {"double-forked grandchild", gcPid, gcTok}} {
		if !testenv.Poll(5*time.Second, func() bool { return !owned(p.pid, p.tok) }) {
			t.Errorf("%s %d still alive after the orphan's teardown", p.name, p.pid)
		}
	}
	for _, k := range []api.Claim{b, c, j} {
		got := d.claim(t, k.ID)
		if got.State != store.Running || got.Pid != k.Pid || got.Token != k.Token {
			t.Errorf("%s after restart: state %s pid %d, want running pid %d", k.ID, got.State, got.Pid, k.Pid)
		}
		if !owned(k.Pid, k.Token) {
			t.Errorf("%s (%d) not alive after restart", k.ID, k.Pid)
		}
	}
	st, err := d.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Reconcile.Seen != 4 || st.Reconcile.TornDown != 1 || st.Reconcile.Readopted != 3 {
		t.Errorf("reconcile report = %+v, want seen 4, torn down 1, readopted 3", st.Reconcile)
	}
	// A clean stop leaves everything running, and the next start
	// re-adopts it all again.
	d.term()
	d = startDaemon(t, state, sock)
	for _, k := range []api.Claim{b, c, j} {
		if !owned(k.Pid, k.Token) || d.claim(t, k.ID).State != store.Running {
			t.Errorf("%s did not survive a clean restart", k.ID)
		}
	}
	// The job's output is kept in the state dir.
	out, err := os.ReadFile(d.claim(t, j.ID).OutputPath)
	if err != nil || !strings.Contains(string(out), "started") {
		t.Errorf("job output = %q, %v", out, err)
	}
}

func TestIntegrationDaemonRestartReissued(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	g := d.launch(t, "--", "sleep", "1000")
	j := d.launch(t, "--detach", "--", "sleep", "1000")
	d.kill9()
	// Both roots end while the daemon is down (init reaps them), and
	// strangers take their pids.
	var strangers []*testenv.Spawned
	for _, k := range []api.Claim{g, j} {
		syscall.Kill(int(k.Pid), syscall.SIGKILL)
		// init reaps the killed root, in its own time.
		s, err := testenv.Reissue(t, k.Pid)
		if err != nil {
			t.Fatalf("reissue pid %d: %v", k.Pid, err)
		}
		strangers = append(strangers, s)
	}
	d = startDaemon(t, state, sock)
	if got := d.claim(t, g.ID); got.State != store.Dropped || got.LastVerdict == nil || got.LastVerdict.Result != verdict.Foreign {
		t.Errorf("grant with a reissued pid: %s %+v, want dropped FOREIGN", got.State, got.LastVerdict)
	}
	got := d.claim(t, j.ID)
	if got.State != store.Retired || !strings.Contains(got.RetiredReason, "FOREIGN") {
		t.Errorf("job with a reissued pid: %s %q, want retired with the reason", got.State, got.RetiredReason)
	}
	for _, s := range strangers {
		if err := syscall.Kill(int(s.Pid), 0); err != nil {
			t.Errorf("stranger at %d was hurt: %v", s.Pid, err)
		}
	}
	// A reap pass does not change its mind.
	rep, err := d.client.Reap(context.Background(), false)
	if err != nil || rep.TornDown != 0 {
		t.Errorf("reap after reissue = %+v, %v; want nothing torn down", rep, err)
	}
}

func TestIntegrationDaemonHolderExit(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	// The holder shell exits right after its launch returns.
	holder, c := holderShell(t, d, "exit 0", "sleep", "1000")
	holder.Wait()
	if !testenv.Poll(10*time.Second, func() bool { return d.claim(t, c.ID).State == store.Released }) {
		t.Fatalf("grant of an exited holder: state %s, want released", d.claim(t, c.ID).State)
	}
	if !testenv.Poll(5*time.Second, func() bool { return !owned(c.Pid, c.Token) }) {
		t.Errorf("grant root %d still alive after its holder exited", c.Pid)
	}
}

func TestIntegrationDaemonSecondAndCorrupt(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	code, _, errs := d.run(t, nil, "run", "--state-dir", state, "--socket", sock+"2", "--log-output", "file:/dev/null")
	if code == 0 || !strings.Contains(errs, "another supervisor") {
		t.Errorf("second daemon: exit %d, stderr %q; want non-zero and a message", code, errs)
	}
	d.term()

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "claims.db"), bytes.Repeat([]byte("garbage!"), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = d.run(t, nil, "run", "--state-dir", bad, "--socket", filepath.Join(bad, "s.sock"), "--log-output", "file:/dev/null")
	if code == 0 || !strings.Contains(errs, "corrupt") || !strings.Contains(errs, "refusing to start") {
		t.Errorf("corrupt store: exit %d, stderr %q; want a refusal", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(bad, "claims.db")); !bytes.Equal(b, bytes.Repeat([]byte("garbage!"), 1024)) {
		t.Error("the corrupt store was modified")
	}
}

func TestIntegrationDaemonCrashBurst(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for r := 0; r < rounds; r++ {
		d := startDaemon(t, state, sock)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					c, err := d.client.Launch(ctx, &api.LaunchRequest{Argv: []string{"sleep", "1000"}, Cwd: "/"})
					if err != nil {
						return
					}
					zero := api.Duration(0)
					d.client.Release(ctx, c.ID, &api.ReleaseRequest{Grace: &zero})
				}
			}()
		}
		time.Sleep(time.Duration(50+r*7%100) * time.Millisecond)
		d.kill9()
		cancel()
		wg.Wait()
	}
	d := startDaemon(t, state, sock)
	cs, err := d.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	insts := map[string]string{}
	for _, c := range cs {
		if ids[c.ID] {
			t.Errorf("claim %s listed twice", c.ID)
		}
		ids[c.ID] = true
		if c.Pid == 0 {
			continue
		}
		k := fmt.Sprintf("%d@%s", c.Pid, c.Token)
		if other, ok := insts[k]; ok {
			t.Errorf("instance %s claimed by %s and %s", k, other, c.ID)
		}
		insts[k] = c.ID
		if c.State == store.Running && !owned(c.Pid, c.Token) {
			t.Errorf("claim %s running after reconcile but its root is not OWNED", c.ID)
		}
	}
	if len(cs) == 0 {
		t.Error("no claims recorded by the bursts")
	}
}
