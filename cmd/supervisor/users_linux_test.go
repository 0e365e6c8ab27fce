package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// These tests try what one user's requests make the root daemon hold or
// do beyond that user's own processes.

// pidfds counts the pidfds process pid holds.
func pidfds(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.Contains(l, "[pidfd]") {
			n++
		}
	}
	return n
}

// TestIntegrationReleaseClosesMemberDescriptors: nobody's grant has
// recorded members; its release binds each to a pidfd for the grace and
// must close them all when the teardown ends. A release that kept them
// let one user take the daemon's descriptors, a tree at a time, until
// nobody's requests could be served.
func TestIntegrationReleaseClosesMemberDescriptors(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	before := pidfds(t, d.cmd.Process.Pid)
	const n = 20
	c := launchAs(t, d, "sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 1000 & i=$((i+1)); done; wait", n))
	testenv.Eventually(t, 10*time.Second, func() bool { return len(d.claim(t, c.ID).Members) == n },
		"the daemon never recorded the %d members of %s", n, c.ID)
	res := release(t, d, asNobody, c.ID)
	if res.Outcome == nil || len(res.Outcome.Targeted) != n+1 || !res.Outcome.Dead {
		t.Fatalf("release of %s = %+v, want %d targeted, all dead", c.ID, res.Outcome, n+1)
	}
	if got := d.claim(t, c.ID); got.State != store.Released {
		t.Fatalf("claim %s is %s, want released", c.ID, got.State)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return pidfds(t, d.cmd.Process.Pid) <= before },
		"the daemon holds %d pidfds after the release, %d before the launch", pidfds(t, d.cmd.Process.Pid), before)
}

// launchAs launches argv as nobody and returns the claim.
func launchAs(t *testing.T, d *testDaemon, argv ...string) api.Claim {
	t.Helper()
	return claimAs(t, d, asNobody, append([]string{"launch", "--json", "--cwd", "/", "--"}, argv...)...)
}

// TestIntegrationTeardownDescriptorsBounded: nobody's grant holds more
// processes than the daemon has descriptors, all ignoring SIGTERM, and is
// released with a long grace. The teardown may hold a tenth of the
// daemon's descriptors for nobody's members, reporting the rest, so
// another user is served during the grace. Before, it bound every member
// for the whole grace and the daemon could not open /dev/null for
// another user's launch.
func TestIntegrationTeardownDescriptorsBounded(t *testing.T) {
	testenv.RequireRoot(t)
	const limit, n = 400, 450
	d, dpid := startDaemonWith(t, nil, nil, []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", limit, limit), "sh", "-c"},
		"--socket-group", fmt.Sprint(nobody))
	c := launchAs(t, d, "sh", "-c", fmt.Sprintf(`trap "" TERM; i=0; while [ $i -lt %d ]; do sleep 1000 & i=$((i+1)); done; wait`, n))
	var res api.ReleaseResponse
	t.Cleanup(func() {
		// The workload's process group (launched in a session of its
		// own), whatever the test got to: 450 sleeps left behind would
		// take nobody's process limit from later tests.
		syscall.Kill(-int(c.Pid), syscall.SIGKILL)
		// What the release left (nobody's members over the budget).
		if res.Outcome != nil {
			for _, m := range res.Outcome.Unproven {
				if owned(m.Pid, m.Token) {
					syscall.Kill(int(m.Pid), syscall.SIGKILL)
				}
			}
		}
	})
	testenv.Eventually(t, 30*time.Second, func() bool { return len(d.claim(t, c.ID).Members) == n },
		"the daemon never recorded the %d members of %s", n, c.ID)

	done := make(chan string, 1)
	go func() {
		cmd := exec.Command(binary(t), "release", "--grace", "20s", "--json", c.ID)
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
		out, _ := cmd.Output()
		done <- string(out)
	}()
	logf := filepath.Join(filepath.Dir(d.sock), "log.json")
	testenv.Eventually(t, 30*time.Second, func() bool {
		b, _ := os.ReadFile(logf)
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, `"signal_sent"`) && strings.Contains(line, c.ID) && strings.Contains(line, "SIGTERM") {
				return true
			}
		}
		return false
	}, "the release of %s never sent SIGTERM", c.ID)
	// In the grace: what the daemon holds, and another user served.
	if held := pidfds(t, dpid); held > limit/10+4 {
		t.Errorf("the daemon holds %d pidfds in nobody's teardown, want at most %d (a tenth of %d, the root's and a few)", held, limit/10+4, limit)
	}
	other := &syscall.Credential{Uid: nobody - 1, Gid: nobody}
	if code, _, errs := d.run(t, other, "launch", "--cwd", "/", "--", "true"); code != 0 {
		t.Errorf("another user's launch during nobody's teardown: exit %d: %s", code, errs)
	}

	out := <-done
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome == nil {
		t.Fatalf("release: %q: %v", out, err)
	}
	over := 0
	for _, m := range res.Outcome.Unproven {
		if strings.Contains(m.Reason, "descriptors") {
			over++
		}
	}
	if got := len(res.Outcome.Targeted) + over; over == 0 || got != n+1 {
		t.Errorf("release: %d targeted and %d reported over the budget, want %d in all, some reported", len(res.Outcome.Targeted), over, n+1)
	}
}

// TestIntegrationTreeHidepid: where the daemon's /proc hides other users'
// processes (hidepid=2), nobody's `tree 1` shows its own processes and
// pid 1 as a bare pid, and nothing of root's: not this test's process,
// its command name or its token. Before, it showed the whole host.
func TestIntegrationTreeHidepid(t *testing.T) {
	testenv.RequireRoot(t)
	// A proc of its own, in a mount namespace of its own: the host's
	// /proc is left as it is.
	wrap := []string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		"mount -t proc -o hidepid=2 proc /proc && exec $0"}
	d, _ := startDaemonWith(t, nil, nil, wrap, "--socket-group", fmt.Sprint(nobody))
	c := launchAs(t, d, "sh", "-c", "sleep 1000 & wait")
	t.Cleanup(func() { d.run(t, asNobody, "release", "--grace", "0s", c.ID) })
	testenv.Eventually(t, 10*time.Second, func() bool { return len(d.claim(t, c.ID).Members) == 1 },
		"the daemon never recorded the sleep of %s", c.ID)
	code, out, errs := d.run(t, asNobody, "tree", "1", "--json")
	if code != 0 {
		t.Fatalf("tree 1 as nobody: exit %d: %s", code, errs)
	}
	var v struct {
		Tree lineage.TreeNode `json:"tree"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("tree --json: %q: %v", out, err)
	}
	root := v.Tree
	if root.Pid != 1 || root.Comm != "" || !root.Token.IsZero() {
		t.Errorf("nobody's tree 1 starts with %+v, want pid 1 alone", root)
	}
	mine := map[int32]bool{}
	var walk func(n *lineage.TreeNode)
	walk = func(n *lineage.TreeNode) {
		for _, k := range n.Children {
			if k.Pid == int32(os.Getpid()) {
				t.Errorf("nobody's tree shows root's %d (%s %s)", k.Pid, k.Comm, k.Token)
			}
			if !k.Exited {
				if uid := uidOf(k.Pid); uid != nobody && alivePid(k.Pid) {
					t.Errorf("nobody's tree shows %d %q of uid %d", k.Pid, k.Comm, uid)
				}
			}
			mine[k.Pid] = true
			walk(k)
		}
	}
	walk(&root)
	if !mine[c.Pid] {
		t.Errorf("nobody's tree lacks its own grant's root %d:\n%s", c.Pid, out)
	}
}

// TestIntegrationVerifyHidepid: where the daemon's /proc hides other
// users' processes, a user's verify of its own process gives the verdict
// and the token observed at the pid; of another user's, UNVERIFIABLE and
// nothing else, whatever token it names. The daemon used to judge a token
// the caller chose against the start time /proc hides from it: verify
// said OWNED or FOREIGN and kill answered 403 "held for another user" or
// 404 by whether the start time was right, and counting down one tick at
// a time found another user's in 2,704 requests.
func TestIntegrationVerifyHidepid(t *testing.T) {
	testenv.RequireRoot(t)
	wrap := []string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		"mount -t proc -o hidepid=2 proc /proc && exec $0"}
	d, _ := startDaemonWith(t, nil, nil, wrap, "--socket-group", fmt.Sprint(nobody))
	c := launchAs(t, d, "sleep", "1000")
	t.Cleanup(func() { d.run(t, asNobody, "release", "--grace", "0s", c.ID) })
	roots := d.launch(t, "sleep", "1000")
	t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", roots.ID) })
	right, err := token.Parse(tokenOf(t, int(roots.Pid)))
	if err != nil {
		t.Fatal(err)
	}
	wrong := func(pid int) token.Token {
		tok, err := token.Parse(tokenOf(t, pid))
		if err != nil {
			t.Fatal(err)
		}
		tok.Start, tok.Ino = 1, 0 // another instance
		return tok
	}
	off := right
	off.Start-- // one tick off
	// A setuid program of nobody's that keeps root as its saved uid:
	// real and effective uid nobody's, hidden from nobody by /proc all
	// the same.
	half := testenv.HalfSetuid(t, asNobody)
	for _, tt := range []struct {
		name     string
		pid      int
		tok      token.Token
		verdict  string
		observed bool
	}{
		{"root's process, another instance", os.Getpid(), wrong(os.Getpid()), "UNVERIFIABLE", false},
		{"root's claim, the right token", int(roots.Pid), right, "UNVERIFIABLE", false},
		{"root's claim, one tick off", int(roots.Pid), off, "UNVERIFIABLE", false},
		{"its own, another instance", int(c.Pid), wrong(int(c.Pid)), "FOREIGN", true},
		{"its own setuid program, saved uid root", half, wrong(half), "UNVERIFIABLE", false},
	} {
		_, out, errs := d.run(t, asNobody, "verify", "--json", fmt.Sprint(tt.pid), tt.tok.String())
		var v struct {
			Verdict  string `json:"verdict"`
			Observed string `json:"observed_token"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: verify %d as nobody: %q %s: %v", tt.name, tt.pid, out, errs, err)
		}
		if v.Verdict != tt.verdict || (v.Observed != "") != tt.observed {
			t.Errorf("%s: nobody's verify of %d = %s, observed %q: want %s, observed token given %v", tt.name, tt.pid, v.Verdict, v.Observed, tt.verdict, tt.observed)
		}
	}
	var kills [2]string
	for i, tok := range []token.Token{right, off} {
		code, _, errs := d.run(t, asNobody, "kill", "--grace", "0s", fmt.Sprint(roots.Pid), tok.String())
		kills[i] = fmt.Sprintf("exit %d: %s", code, errs)
		if code == 0 || strings.Contains(errs, "another user") {
			t.Errorf("nobody's kill of root's claim with %s: %s", tok, kills[i])
		}
	}
	if kills[0] != kills[1] {
		t.Errorf("nobody's kill answers the right start time and one a tick off apart:\n %s\n %s", kills[0], kills[1])
	}
	if code, out, errs := d.run(t, nil, "verify", fmt.Sprint(roots.Pid), right.String()); code != 0 || !strings.HasPrefix(out, "OWNED") {
		t.Errorf("root's verify of its claim = %d %q %s, want OWNED", code, out, errs)
	}
}

// TestIntegrationMembersCountInQuota: the members the daemon records for
// nobody's grant count against nobody's byte quota as they are recorded
// (128 bytes each), so a grant of 300 children under a 16 KiB quota
// records what fits, and nobody's next launch is refused over quota.
// Before, members recorded after the launch were never counted: the
// grant stored all 300 and the next launch was accepted, and one user's
// claims could fill the store for everyone.
func TestIntegrationMembersCountInQuota(t *testing.T) {
	testenv.RequireRoot(t)
	const n, quota = 300, 16 << 10
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--quota-bytes", fmt.Sprint(quota))
	c := launchAs(t, d, "sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 1000 & i=$((i+1)); done; wait", n))
	var members int
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err := d.client.Status(context.Background())
		members = len(d.claim(t, c.ID).Members)
		return err == nil && uint64(members)+st.MembersLost >= n
	}, "the daemon never handled the %d members of %s", n, c.ID)
	if members*128 > quota {
		t.Errorf("nobody's grant recorded %d members (%d bytes of quota), want at most %d", members, members*128, quota/128)
	}
	// A launch of 200 bytes more than that does not fit.
	if code, _, errs := d.run(t, asNobody, "launch", "--cwd", "/", "--", "true", strings.Repeat("x", 200)); code != 75 || !strings.Contains(errs, "quota") {
		t.Errorf("nobody's launch with its quota taken by members: exit %d %q, want 75, refused over quota", code, errs)
	}
}

// passConnEnv makes the test binary connect to the socket the variable
// names, hand the connection to descriptor 3 (a unix socket) with
// SCM_RIGHTS, and exit: the connection's peer credentials then name a
// process that is gone. It asks for the status first, so the daemon has
// accepted the connection (and read its peer) while the process lived:
// otherwise a peer gone by then is refused as one whose pid namespace
// cannot be read, whatever it then asks.
const passConnEnv = "SUPERVISOR_TEST_PASS_CONN"

func init() {
	sock := os.Getenv(passConnEnv)
	if sock == "" {
		return
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprint(c, "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "status before the hand-off:", err, resp)
		os.Exit(1)
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestIntegrationLaunchCallerGone: nobody connects, hands the connection
// on and exits; the launch sent on it names a caller whose limits cannot
// be read. It is refused: before, the workload got the daemon's limits
// in place of the caller's (nofile 64 became 20,000). And when the pid has
// gone to another process of nobody's meanwhile (forced, through
// clone3's set_tid), the launch is refused as well: the daemon read the
// limits and root at the pid, the other process's, where the socket's own
// pidfd (SO_PEERPIDFD) names the caller that is gone.
func TestIntegrationLaunchCallerGone(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	for _, reissued := range []bool{false, true} {
		var reissue []string
		if reissued {
			reissue = []string{"setpriv", "--reuid", fmt.Sprint(nobody), "--regid", fmt.Sprint(nobody), "--clear-groups", "sleep", "1000"}
		}
		conn, _ := handedConn(t, sock, asNobody, reissue, func(pid int32) bool { return uidOf(pid) == nobody })
		body := `{"argv":["sleep","1000"],"cwd":"/"}`
		fmt.Fprintf(conn, "POST /v1/launch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusConflict { // startDaemon's cleanup releases what started
			t.Errorf("launch on the connection of a caller gone (its pid reissued: %v) = %d %s, want 409", reissued, resp.StatusCode, b)
		}
	}
}

// handedConn returns a connection to sock made by a process (the test
// binary as cred) that handed it on and exited, and that process's pid.
// With reissue, the pid has since gone to a process running reissue
// (forced, through clone3's set_tid), and ready(pid) held.
func handedConn(t *testing.T, sock string, cred *syscall.Credential, reissue []string, ready func(pid int32) bool) (net.Conn, int32) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "mine"), os.NewFile(uintptr(pair[1]), "theirs")
	defer mine.Close()
	helper := testenv.SelfAs(t, cred, []string{passConnEnv + "=" + sock}, "-test.run=^$")
	helper.ExtraFiles = []*os.File{theirs}
	if out, err := helper.CombinedOutput(); err != nil {
		t.Fatalf("the helper as %v: %v: %s", cred, err, out)
	}
	theirs.Close()
	pid := int32(helper.Process.Pid)
	if reissue != nil {
		other, err := testenv.SpawnAt(t, pid, reissue...)
		if err != nil {
			t.Fatalf("reissuing the caller's pid %d: %v", pid, err)
		}
		t.Cleanup(other.Stop)
		testenv.Eventually(t, 10*time.Second, func() bool { return ready(other.Pid) },
			"the process at the caller's pid %d never became %v", other.Pid, reissue)
	}
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(mine.Fd()), make([]byte, 1), oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v: %v", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("descriptors %v: %v", fds, err)
	}
	conn, err := net.FileConn(os.NewFile(uintptr(fds[0]), "conn"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, pid
}

// TestIntegrationDryRunReapOwnClaims: a dry run of the reaper asked by
// nobody judges nobody's claims only: its report counts one claim, not
// root's two as well. Before, every claim was judged for any user (23 ms
// of the daemon's CPU per request with 300 claims of root's, at 100
// requests a second) and the counts told of every user's claims.
func TestIntegrationDryRunReapOwnClaims(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	d.launch(t, "--", "sleep", "1000")
	d.launch(t, "--", "sleep", "1000")
	c := launchAs(t, d, "sleep", "1000")
	code, out, errs := d.run(t, asNobody, "reap", "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("reap --dry-run as nobody: exit %d: %s", code, errs)
	}
	var rep api.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if rep.Seen != 1 {
		t.Errorf("nobody's dry run saw %d claims, want 1 (its %s)", rep.Seen, c.ID)
	}
	for _, it := range rep.Items {
		if it.ID != c.ID {
			t.Errorf("nobody's dry run reports %s, not its own", it.ID)
		}
	}
	if code, out, _ := d.run(t, nil, "reap", "--dry-run", "--json"); code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Seen != 3 {
		t.Errorf("root's dry run: exit %d, saw %d claims, want 3", code, rep.Seen)
	}
	// The status counts alike: nobody's own claims, root's all of them.
	for _, tc := range []struct {
		who  *syscall.Credential
		want int
	}{{asNobody, 1}, {nil, 3}} {
		code, out, errs := d.run(t, tc.who, "status", "--json")
		var st api.Status
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status as %v: exit %d %s", tc.who, code, errs)
		}
		if st.Claims != tc.want || st.Counts[store.Grant][store.Running] != tc.want {
			t.Errorf("status as %v counts %d claims (%v), want %d", tc.who, st.Claims, st.Counts, tc.want)
		}
	}
}

// TestIntegrationFinishedCapPerUser: with at most 4 finished claims
// kept, nobody's job result, owed to its caller, outlives another user's
// churn of 8 short launches: the user with the most finished claims
// loses its oldest first. Before, the oldest of all went, nobody's job
// first.
func TestIntegrationFinishedCapPerUser(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--max-final", "4")
	job := claimAs(t, d, asNobody, "launch", "--json", "--detach", "--cwd", "/", "--", "true")
	testenv.Eventually(t, 10*time.Second, func() bool { return d.claim(t, job.ID).State == store.Exited },
		"nobody's job %s never exited", job.ID)
	other := &syscall.Credential{Uid: nobody - 1, Gid: nobody}
	for range 8 {
		claimAs(t, d, other, "launch", "--json", "--cwd", "/", "--", "true")
	}
	// Finished claims of each, and whether any of the other's is open.
	final := func() (mine, theirs int, open bool) {
		cs, err := d.client.ListAll(context.Background(), api.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			switch {
			case c.State != store.Released && c.State != store.Exited:
				open = open || c.UID == nobody-1
			case c.UID == nobody:
				mine++
			case c.UID == nobody-1:
				theirs++
			}
		}
		return mine, theirs, open
	}
	var mine, theirs int
	testenv.Eventually(t, 20*time.Second, func() bool {
		var open bool
		mine, theirs, open = final()
		return !open && mine+theirs <= 4 && theirs > 0
	}, "finished claims never cut to 4: nobody %d, the other %d", mine, theirs)
	if mine != 1 {
		t.Errorf("nobody's owed job %s was dropped for another user's churn (finished: nobody %d, the other %d)", job.ID, mine, theirs)
	}
}

// TestIntegrationOwnUIDKeepsCallerGroups: nobody, running with a group
// the user database does not give it, launches naming its own uid: the
// workload has the caller's groups, as a launch naming no uid does, not
// the database's. Before, naming one's own uid swapped the caller's
// groups for all of its user's, so a process that had dropped a group
// got it back.
func TestIntegrationOwnUIDKeepsCallerGroups(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	const extra = 4 // adm: not one of nobody's in the user database
	cred := &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{nobody, extra}}
	for _, body := range []string{
		`{"argv":["sleep","1000"],"cwd":"/"}`,
		fmt.Sprintf(`{"argv":["sleep","1000"],"cwd":"/","uid":%d}`, nobody),
	} {
		cmd := exec.Command("curl", "-s", "--unix-socket", sock, "-H", "Content-Type: application/json", "-d", body, "http://x/v1/launch")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.Output()
		var c api.Claim
		if err != nil || json.Unmarshal(out, &c) != nil || c.Pid == 0 {
			t.Fatalf("launch %s as nobody: %q %v", body, out, err)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(status)) {
			if g, ok := strings.CutPrefix(line, "Groups:"); ok && !slices.Contains(strings.Fields(g), fmt.Sprint(extra)) {
				t.Errorf("launch %s: the workload's groups are %q, want the caller's (%d among them)", body, strings.TrimSpace(g), extra)
			}
		}
	}
}

// TestIntegrationOwedJobReadByRoot: root reading a user's finished job (an
// operator's `show`) leaves its result owed to the user; the user's own
// read picks it up. Before, root's read marked it picked up, and the
// reaper's shorter retention for finished claims then applied to it.
func TestIntegrationOwedJobReadByRoot(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	c := claimAs(t, d, asNobody, "launch", "--json", "--detach", "--cwd", "/", "--", "true")
	testenv.Eventually(t, 30*time.Second, func() bool { return d.claim(t, c.ID).State == store.Exited },
		"nobody's job %s never exited", c.ID)
	if got := d.claim(t, c.ID); got.FollowedUp {
		t.Fatalf("root's read of nobody's job %s picked its result up", c.ID)
	}
	if got := claimAs(t, d, asNobody, "show", "--json", c.ID); !got.FollowedUp {
		t.Errorf("nobody's read of its job %s: followed_up false, want true", c.ID)
	}
	if got := d.claim(t, c.ID); !got.FollowedUp {
		t.Errorf("after nobody's read, job %s is still owed", c.ID)
	}
}

// TestIntegrationSubordinateUIDsShareQuota: the subordinate uids of one
// user (a rootless container's, mapped from /etc/subuid) draw on that
// user's share: with a quota of two live claims, two launches as one of
// them and a third as another take it past the quota. Before, each uid
// had a quota of its own, so one user had 65,536 of every share.
func TestIntegrationSubordinateUIDsShareQuota(t *testing.T) {
	testenv.RequireRoot(t)
	const creator, group = 4321, 200100
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", strconv.Itoa(group), "--quota-claims", "2")
	launch := func(sub uint32) (string, int) {
		t.Helper()
		var out bytes.Buffer
		cmd := testenv.Subordinate(t, creator, sub, group,
			fmt.Sprintf("exec %s launch --socket %s --cwd / -- sleep 600 2>&1", binary(t), sock), &out)
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return out.String(), code
	}
	for range 2 {
		if out, code := launch(200000); code != 0 {
			t.Fatalf("launch as subordinate uid 200000: exit %d: %s", code, out)
		}
	}
	out, code := launch(200001)
	if code != 75 || !strings.Contains(out, fmt.Sprintf("uid %d holds 2 live claims", creator)) {
		t.Errorf("a third launch, as another subordinate uid of uid %d: exit %d %q, want 75, over uid %d's quota", creator, code, out, creator)
	}
	cs, err := d.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.UID != 200000 {
			t.Errorf("claim %s recorded for uid %d, want the client's own, 200000 (the share is not who acts)", c.ID, c.UID)
		}
	}
}

// TestIntegrationSubordinateUIDOutsideItsNamespace: a workload the daemon
// started for a client in a user namespace runs as the client's
// subordinate uid in the daemon's namespace, where no namespace says whose
// it is: /etc/subuid does. With a quota of two live claims, a job launched
// as a subordinate uid of uid 4321's (one claim of its) launches one grant
// and is refused the second. Before, the job drew on a share of its own.
func TestIntegrationSubordinateUIDOutsideItsNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	const creator, group = 4321, 200100
	// The host's /etc/subuid gains a line for the test: written whole
	// and renamed into place (useradd and the daemon never read half a
	// file), and put back the same way, a failure to restore failing the
	// test. A line a killed run left is not added twice.
	const subuid = "/etc/subuid"
	prev, err := os.ReadFile(subuid)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	// A range no line has yet: useradd gives each user it adds 65,536
	// from 100,000 up, and the first line that covers a uid names its
	// owner.
	sub := freeSubordinate(prev, 200000, 100)
	line := fmt.Sprintf("%d:%d:100\n", creator, sub)
	existed := err == nil
	replace := func(b []byte) error {
		tmp := subuid + ".supervisor-test"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, subuid)
	}
	t.Cleanup(func() {
		var err error
		if existed {
			err = replace(prev)
		} else {
			err = os.Remove(subuid)
		}
		if err != nil {
			t.Errorf("restoring %s: %v", subuid, err)
		}
	})
	if !strings.Contains("\n"+string(prev), "\n"+line) {
		if err := replace(append(slices.Clone(prev), line...)); err != nil {
			t.Fatal(err)
		}
	}
	state, sock := newDirs(t)
	startDaemon(t, state, sock, "--socket-group", strconv.Itoa(group), "--quota-claims", "2")
	script := fmt.Sprintf("for i in 1 2; do %s launch --socket %s --cwd / -- sleep 600 2>&1; done", binary(t), sock)
	var out bytes.Buffer
	cmd := testenv.Subordinate(t, creator, sub, group,
		fmt.Sprintf("exec %s launch --socket %s --cwd / --detach --json -- sh -c '%s'", binary(t), sock, script), &out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("launch of the job: %v: %s", err, out.String())
	}
	var job api.Claim
	if err := json.Unmarshal(out.Bytes(), &job); err != nil {
		t.Fatalf("launch --json printed %q: %v", out.String(), err)
	}
	var got string
	testenv.Eventually(t, 30*time.Second, func() bool {
		b, _ := os.ReadFile(job.OutputPath)
		got = string(b)
		return strings.Count(got, "\n") >= 2
	}, "the job's two launches never answered")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "g-") || !strings.Contains(lines[1], fmt.Sprintf("uid %d holds 2 live claims", creator)) {
		t.Errorf("the job's launches answered %q; want a grant, then a refusal over uid %d's quota", got, creator)
	}
}

// freeSubordinate returns the first base from min up, in steps of n,
// whose n uids no line of the subordinate id file subuid covers.
func freeSubordinate(subuid []byte, min, n uint32) uint32 {
	base := min
	for again := true; again; {
		again = false
		for l := range strings.SplitSeq(string(subuid), "\n") {
			f := strings.Split(l, ":")
			if len(f) != 3 {
				continue
			}
			start, err1 := strconv.ParseUint(f[1], 10, 32)
			count, err2 := strconv.ParseUint(f[2], 10, 32)
			if err1 != nil || err2 != nil || uint64(base)+uint64(n) <= start || uint64(base) >= start+count {
				continue
			}
			base = uint32((start + count + uint64(n) - 1) / uint64(n) * uint64(n))
			again = true
		}
	}
	return base
}

// TestIntegrationAdmitOthersMember: root launches a grant that runs as
// nobody; the claim is root's. nobody may not admit a member of it (its
// inner shell): before, the admit was taken and relabelled the member's
// subtree as nobody's claim, whose later children were recorded as
// nobody's members, and the process was held by two claims.
func TestIntegrationAdmitOthersMember(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	uid, gid := uint32(nobody), uint32(nobody)
	c, err := d.client.Launch(context.Background(), &api.LaunchRequest{
		Argv: []string{"sh", "-c", `sh -c "sleep 1000; :" & wait`}, Cwd: "/", UID: &uid, GID: &gid})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.run(t, nil, "release", "--grace", "0s", c.ID) })
	var inner int
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.Pid, c.Pid))
		f := strings.Fields(string(b))
		if err != nil || len(f) == 0 {
			return false
		}
		inner, _ = strconv.Atoi(f[0])
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", inner))
		return strings.Contains(string(cmd), "sleep 1000")
	}, "root's grant %s never started its inner shell", c.ID)
	code, out, errs := d.run(t, asNobody, "admit", fmt.Sprint(inner), tokenOf(t, inner))
	t.Logf("nobody's admit of %d: exit %d %s %s", inner, code, out, errs)
	if code == 0 || !strings.Contains(errs, "another user's claim") {
		t.Errorf("nobody's admit of a member of root's grant = exit %d %s %s, want refused as another user's claim's", code, out, errs)
	}
	if code == 0 {
		var got api.Claim
		if json.Unmarshal([]byte(out), &got) == nil && got.ID != "" {
			d.run(t, asNobody, "release", "--grace", "0s", got.ID)
		}
	}
}

// TestIntegrationShorterGraceJoins: nobody releases its TERM-ignoring
// grant with an hour's grace; root's release of it with a grace of 1 s
// brings the teardown's end forward: the grant is released (the process
// killed) within seconds. Before, root's release joined the teardown
// in progress, its grace was dropped without a word, and it waited out
// nobody's hour.
func TestIntegrationShorterGraceJoins(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	c := launchAs(t, d, "sh", "-c", `trap "" TERM; while :; do sleep 1; done`)
	t.Cleanup(func() { syscall.Kill(-int(c.Pid), syscall.SIGKILL) })
	slow := exec.Command(binary(t), "release", "--grace", "1h", c.ID)
	slow.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
	slow.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Process.Kill(); slow.Wait() })
	testenv.Eventually(t, 10*time.Second, func() bool {
		got := d.claim(t, c.ID)
		return got.State == store.Releasing && time.Until(got.GraceUntil) > 50*time.Minute
	}, "nobody's release of %s never began its hour's grace", c.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fast := exec.CommandContext(ctx, binary(t), "release", "--grace", "1s", c.ID)
	fast.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
	out, err := fast.CombinedOutput()
	if err != nil {
		t.Fatalf("root's release --grace 1s of a grant in nobody's hour of grace: %v (%s)", err, out)
	}
	got := d.claim(t, c.ID)
	if got.State == store.Releasing || got.State == store.Running {
		t.Errorf("after root's release with 1 s of grace the grant is %s, want released", got.State)
	}
	if err := syscall.Kill(int(c.Pid), 0); err == nil {
		t.Errorf("the grant's root %d still runs after root's release with 1 s of grace", c.Pid)
	}
}
