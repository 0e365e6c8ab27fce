package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// streamCLI runs `supervisor events ARGS` against d as cred (nil: root)
// until the test ends, once it reads the daemon's stream.
type streamCLI struct {
	cmd      *exec.Cmd
	out, err *lockedBuffer
	done     chan struct{}
}

func startStream(t *testing.T, d *testDaemon, cred *syscall.Credential, args ...string) *streamCLI {
	t.Helper()
	s := &streamCLI{out: &lockedBuffer{}, err: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary(t), append([]string{"events"}, args...)...)
	s.cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
	s.cmd.Dir = "/"
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.err
	if cred != nil {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.cmd.Process.Kill(); <-s.done })
	testenv.Eventually(t, 20*time.Second, func() bool { return strings.Contains(s.err.String(), "the daemon's stream at") },
		"events as %v never read the daemon's stream: %s", cred, s.err)
	return s
}

// records returns the JSON records printed so far.
func (s *streamCLI) records(t *testing.T) []api.StreamRecord {
	t.Helper()
	var out []api.StreamRecord
	// Only whole lines: the printer's buffer and the pipe may hand over
	// the last one in pieces.
	text := s.out.String()
	text = text[:strings.LastIndexByte(text, '\n')+1]
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var r api.StreamRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

func has(rs []api.StreamRecord, f func(r api.StreamRecord) bool) bool {
	for _, r := range rs {
		if f(r) {
			return true
		}
	}
	return false
}

// TestIntegrationEventsFromDaemon: `events` reads the daemon's stream. A
// user of the socket group (nobody) sees its own workload's fork, exec and
// exit and its claim's events, and nothing of root's: neither a process
// root runs nor root's claim. Root sees both. Streams are long-lived
// requests under the user's cap, and they end, with exit code 69, when the
// daemon stops.
func TestIntegrationEventsFromDaemon(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}
	theirsStream := startStream(t, d, cred, "--json")
	rootStream := startStream(t, d, nil, "--json")
	textStream := startStream(t, d, cred, "--kind", "exit,claim")

	mine := d.launch(t, "--", "sh", "-c", "/bin/sleep 0.2; exit 4")
	// A child the workload forks before the launch has admitted the
	// claim is nobody's by uid, with no claim: the workload waits for
	// the gate, opened once the launch has answered, before the child
	// the test looks for.
	theirs := launchGated(t, d, cred, "/bin/sleep 0.2; exit 3")
	plain := exec.Command("/bin/sh", "-c", "/bin/true; exit 5")
	if err := plain.Run(); err == nil {
		t.Fatal("sh -c 'exit 5' succeeded")
	}
	plainPid := int32(plain.Process.Pid)
	// nobody's own process outside any claim: eBPF's exec context names
	// its uid, so nobody sees it.
	own := exec.Command("/bin/sh", "-c", "/bin/true; exit 6")
	own.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := own.Run(); err == nil {
		t.Fatal("sh -c 'exit 6' succeeded")
	}
	ownPid := int32(own.Process.Pid)

	isExit := func(pid int32, code int) func(r api.StreamRecord) bool {
		return func(r api.StreamRecord) bool {
			return r.Kind == "exit" && r.Pid == pid && r.ExitCode != nil && *r.ExitCode == code
		}
	}
	claimDone := func(id string) func(r api.StreamRecord) bool {
		return func(r api.StreamRecord) bool { return r.Kind == "claim" && r.Claim == id && r.State == "released" }
	}
	lost := func(r api.StreamRecord) bool { return r.Kind == "lost" }
	testenv.Eventually(t, 30*time.Second, func() bool {
		rs := rootStream.records(t)
		// Root sees the whole host: a storm elsewhere may overflow its
		// buffer, and then the stream says so (a lost record) instead.
		return has(rs, isExit(plainPid, 5)) && has(rs, isExit(mine.Pid, 4)) && has(rs, claimDone(mine.ID)) && has(rs, claimDone(theirs.ID)) ||
			has(rs, lost)
	}, "root's stream lacks root's process, root's claim or nobody's claim, and reports no loss:\n%s", rootStream.out)
	testenv.Eventually(t, 30*time.Second, func() bool {
		return has(theirsStream.records(t), claimDone(theirs.ID))
	}, "nobody's stream lacks its claim's release:\n%s", theirsStream.out)

	rs := theirsStream.records(t)
	for _, kind := range []string{"fork", "exec", "exit"} {
		// The workload's child (sleep): forked by the claim's root.
		if !has(rs, func(r api.StreamRecord) bool { return r.Kind == kind && r.PPid == theirs.Pid && r.Claim == theirs.ID }) {
			t.Errorf("nobody's stream lacks its workload child's %s:\n%s", kind, theirsStream.out)
		}
	}
	if !has(rs, func(r api.StreamRecord) bool { return r.Kind == "exec" && r.Pid == ownPid && r.Claim == "" }) {
		t.Errorf("nobody's stream lacks the exec of its own unclaimed process %d:\n%s", ownPid, theirsStream.out)
	}
	// The daemon logs no process lines here: eBPF captures arguments only
	// because the streams are open.
	if !has(rs, func(r api.StreamRecord) bool {
		return r.Kind == "exec" && r.Pid == ownPid && (r.Mechanism != "ebpf" || slices.Equal(r.Argv, own.Args))
	}) {
		t.Errorf("nobody's stream: the exec of %d lacks its arguments %q:\n%s", ownPid, own.Args, theirsStream.out)
	}
	if !has(rs, isExit(ownPid, 6)) {
		t.Errorf("nobody's stream lacks the exit of its own unclaimed process %d (the graph's uid):\n%s", ownPid, theirsStream.out)
	}
	if !has(rs, isExit(theirs.Pid, 3)) {
		t.Errorf("nobody's stream lacks its workload's exit 3:\n%s", theirsStream.out)
	}
	for _, r := range rs {
		switch {
		case r.Kind == "lost":
		case r.UID == nil || *r.UID != nobody, r.Claim == mine.ID, r.Pid == plainPid && r.Kind != "claim", r.Pid == mine.Pid:
			t.Errorf("nobody's stream shows another uid's record: %+v", r)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(textStream.out.String(), theirs.ID+" claim state changed: running -> released")
	}, "nobody's text stream lacks its claim's line:\n%s", textStream.out)
	text := textStream.out.String()
	if !strings.HasPrefix(text, "TIME ") || !strings.Contains(text, fmt.Sprintf("  exit   %-8d ", theirs.Pid)) ||
		strings.Contains(text, "  fork   ") || strings.Contains(text, mine.ID) {
		t.Errorf("nobody's text stream with --kind exit,claim:\n%s", text)
	}

	// nobody has UserLong (4) event streams at most: two streams here
	// and two more; a fifth is refused. Its releases have room of their
	// own: with four streams open they were refused (429) as well.
	startStream(t, d, cred, "--json")
	startStream(t, d, cred, "--json")
	code, _, errs := d.run(t, cred, "events")
	if code != 75 || !strings.Contains(errs, "4 event streams") {
		t.Errorf("a fifth stream of nobody: exit %d: %s, want 75 (busy, retry later)", code, errs)
	}
	gated := launchGated(t, d, cred, "exec /bin/sleep 100")
	if code, _, errs := d.run(t, cred, "release", gated.ID); code != 0 {
		t.Errorf("nobody's release of its own grant beside 4 streams: exit %d: %s", code, errs)
	}

	d.term()
	for _, s := range []*streamCLI{theirsStream, rootStream, textStream} {
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("events did not end when the daemon stopped: %s", s.err)
		}
		if c := s.cmd.ProcessState.ExitCode(); c != exitUnavailable {
			t.Errorf("events ended with %d (%s), want %d", c, s.err, exitUnavailable)
		}
	}
}

// TestIntegrationEventsStalledReader: a subscriber that stops reading
// loses events, and when it reads again it gets a lost record with the
// count; meanwhile the daemon answers others and a reading subscriber
// misses nothing.
func TestIntegrationEventsStalledReader(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	reader := startStream(t, d, nil, "--json", "--kind", "exit,lost")

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprint(conn, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// About 1 KiB of records a process: far more than the stalled
	// subscriber's buffer and the socket's together.
	script := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt 1500 ]; do /bin/true; i=$((i+1)); done; exit 9")
	if err := script.Run(); err == nil {
		t.Fatal("the loop did not exit 9")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := d.client.Status(ctx); err != nil {
		t.Fatalf("the daemon does not answer while a subscriber stalls: %v", err)
	}
	// The reading subscriber asked the daemon for exits only, so its
	// buffer holds those alone: it gets every exit of the loop's 1,500
	// children, or, when it was starved of CPU for long enough to fall
	// behind anyway, a stream loss that covers each one it lacks. A
	// missing exit without a loss is a defect.
	loopPid := int32(script.Process.Pid)
	tally := func() (children, lost int, loopExit bool) {
		for _, r := range reader.records(t) {
			switch {
			case r.Kind == "exit" && r.PPid == loopPid:
				children++
			case r.Kind == "exit" && r.Pid == loopPid:
				loopExit = true
			case r.Kind == "lost" && r.Mechanism == "stream":
				lost += int(r.Count)
			}
		}
		return children, lost, loopExit
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		children, lost, loopExit := tally()
		return children+lost >= 1500 && (loopExit || lost > 0)
	}, "the reading subscriber lacks the loop's exits and reports no loss for them:\n%s", reader.out)
	if children, lost, loopExit := tally(); lost == 0 && (children != 1500 || !loopExit) {
		t.Errorf("the reading subscriber has %d of 1500 children's exits (loop's own: %v) and reports no loss", children, loopExit)
	} else if lost > 0 {
		t.Logf("the reading subscriber fell behind (a starved CPU): %d of 1500 exits, %d lost and reported", children, lost)
	}

	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, api.MaxStreamLine)
	var lost api.StreamRecord
	for lost.Count == 0 && sc.Scan() {
		var r api.StreamRecord
		if len(sc.Bytes()) > 0 && json.Unmarshal(sc.Bytes(), &r) == nil && r.Kind == "lost" && r.Mechanism == "stream" {
			lost = r
		}
	}
	if lost.Count == 0 {
		t.Fatalf("the stalled subscriber got no lost record (%v)", errors.Join(sc.Err()))
	}
	t.Logf("the stalled subscriber lost %d records", lost.Count)
}

// rawRecords returns the whole JSON lines printed so far, as objects.
func (s *streamCLI) rawRecords(t *testing.T) []map[string]any {
	t.Helper()
	text := s.out.String()
	text = text[:strings.LastIndexByte(text, '\n')+1]
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// find returns the first record f accepts, nil when none does.
func find(rs []map[string]any, f func(r map[string]any) bool) map[string]any {
	for _, r := range rs {
		if f(r) {
			return r
		}
	}
	return nil
}

// execOf accepts the exec records of pid, or of ppid's children (pid 0),
// whose argv holds mark.
func execOf(pid, ppid int, mark string) func(r map[string]any) bool {
	return func(r map[string]any) bool {
		if r["kind"] != "exec" || pid != 0 && r["pid"] != float64(pid) || ppid != 0 && r["ppid"] != float64(ppid) {
			return false
		}
		argv, _ := r["argv"].([]any)
		return mark == "" || slices.ContainsFunc(argv, func(a any) bool { return a == mark })
	}
}

// findOrLost waits until s has a record each f accepts, or a loss (root's
// stream sees the whole host: a storm elsewhere may overflow it, and then
// it says so). It returns the records, in the order of fs, or nil after a
// loss that left one missing.
func findOrLost(t *testing.T, s *streamCLI, fs ...func(r map[string]any) bool) []map[string]any {
	t.Helper()
	var got []map[string]any
	testenv.Eventually(t, 30*time.Second, func() bool {
		all := s.rawRecords(t)
		got = got[:0]
		for _, f := range fs {
			if r := find(all, f); r != nil {
				got = append(got, r)
			}
		}
		return len(got) == len(fs) || find(all, func(r map[string]any) bool { return r["kind"] == "lost" }) != nil
	}, "the stream lacks records and reports no loss:\n%s", s.out)
	if len(got) < len(fs) {
		t.Logf("the stream lost records: the view is unchecked here")
		return nil
	}
	return got
}

// withheldOf returns a record's withheld list, sorted.
func withheldOf(r map[string]any) []string {
	var w []string
	l, _ := r["withheld"].([]any)
	for _, x := range l {
		w = append(w, fmt.Sprint(x))
	}
	slices.Sort(w)
	return w
}

// parentWithheld is what a stream of a user other than root withholds
// of a parent description p (without hidepid), sorted: its argv unless
// shown (argv), its exe and working directory, and its interactive when
// it has ids (a context).
func parentWithheld(p map[string]any, argv bool) []string {
	var w []string
	if !argv {
		w = append(w, "parent.argv")
	}
	w = append(w, "parent.exe")
	if p["user"] != nil {
		w = append(w, "parent.interactive")
	}
	return append(w, "parent.working_directory")
}

// recordParent returns a record's parent object, nil when it has none.
func recordParent(r map[string]any) map[string]any {
	p, _ := r["parent"].(map[string]any)
	return p
}

// secretDir returns a directory only root may enter.
func secretDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root-only")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// setuidBash returns a copy of bash, setuid root, that every user may run:
// with -p it keeps its effective uid 0 beside the caller's real uid.
func setuidBash(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "suidbash")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bash")
	if out, err := exec.Command("install", "-m", "4755", "/bin/bash", bin).CombinedOutput(); err != nil {
		testenv.Skip(t, "cannot make a setuid bash: %v: %s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runuserPath returns runuser(1), which root runs to start a command as
// another user (it forks, and its child setuid()s and execs).
func runuserPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("runuser")
	if err != nil {
		testenv.Skip(t, "no runuser: %v", err)
	}
	return p
}

// TestIntegrationEventsWithheld: nobody is shown of its own processes what
// it could read in /proc, and root sees it all. Root runs runuser in a
// directory only root may enter, whose child becomes nobody and execs: in
// nobody's stream that exec's parent (runuser, root's) has its comm and
// arguments but neither executable nor working directory (/proc/PID/exe
// and cwd need ptrace access), named as withheld; root's has both. So
// too under root's perl that became nobody in place before it forked:
// its ids are nobody's, but a process that setuid() is not dumpable, and
// its exe and directory are its root exec's. nobody
// runs a setuid-root bash that enters root's directory and execs as euid 0:
// nobody's stream withholds that exec's executable and working directory.
// nobody's own process, wholly its, has both. With /proc mounted with
// hidepid=2 where the daemon runs, nobody's stream also withholds the
// parent and the setuid exec's arguments, and still has its own process's.
func TestIntegrationEventsWithheld(t *testing.T) {
	testenv.RequireRoot(t)
	runuser, suid := runuserPath(t), setuidBash(t)
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}
	for _, hidepid := range []bool{false, true} {
		t.Run(fmt.Sprint("hidepid=", hidepid), func(t *testing.T) {
			var wrap []string
			if hidepid {
				// A proc of its own, in a mount namespace of its own: the
				// host's /proc is left as it is.
				wrap = []string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
					"mount -t proc -o hidepid=2 proc /proc && exec $0"}
			}
			d, _ := startDaemonWith(t, nil, nil, wrap, "--socket-group", fmt.Sprint(nobody))
			theirs := startStream(t, d, cred, "--json")
			root := startStream(t, d, nil, "--json", "--kind", "exec")
			secret := secretDir(t)
			mark := fmt.Sprintf("mark-%d-%v", os.Getpid(), hidepid)

			// root's runuser, in root's directory, starts nobody's sh.
			ru := exec.Command(runuser, "-u", "nobody", "--", "/bin/sh", "-c", "exit 0", mark)
			ru.Dir = secret
			if out, err := ru.CombinedOutput(); err != nil {
				t.Fatalf("runuser: %v: %s", err, out)
			}
			// root's perl, in root's directory, becomes nobody in place
			// (no exec) and starts nobody's sh: its description now has
			// nobody's ids, and root's exec's executable and directory
			// (a process that setuid() is not dumpable: /proc hides them).
			pl := exec.Command("perl", "-e",
				`$) = "65534 65534"; $( = 65534; $< = $> = 65534; exit(system("/bin/sh", "-c", "exit 0", $ARGV[0]) >> 8)`, mark)
			pl.Dir = secret
			if out, err := pl.CombinedOutput(); err != nil {
				t.Fatalf("perl: %v: %s", err, out)
			}
			// nobody's setuid bash enters root's directory and execs as
			// euid 0.
			su := exec.Command(suid, "-p", "-c", "cd "+secret+" && exec /bin/echo "+mark)
			su.Dir = "/"
			su.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			if out, err := su.CombinedOutput(); err != nil || !strings.Contains(string(out), mark) {
				t.Fatalf("setuid bash: %v: %s", err, out)
			}
			// nobody's own process, in a directory of its own.
			ownDir := t.TempDir()
			os.Chmod(ownDir, 0o755)
			own := exec.Command("/bin/sh", "-c", "exit 0", mark)
			own.Dir = ownDir
			own.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			if err := own.Run(); err != nil {
				t.Fatal(err)
			}

			child := execOf(0, ru.Process.Pid, mark)
			dropped := execOf(0, pl.Process.Pid, mark)
			mine := execOf(own.Process.Pid, 0, "")
			// The setuid exec's argv is withheld: found by its pid and
			// executable's name.
			setuidExec := func(r map[string]any) bool {
				return r["kind"] == "exec" && r["pid"] == float64(su.Process.Pid) && r["comm"] == "echo"
			}
			testenv.Eventually(t, 30*time.Second, func() bool {
				rs := theirs.rawRecords(t)
				// runuser and perl themselves are root's: their execs, and their
				// exits, attributed through the uid of their last context
				// (perl's exec as root, though it became nobody since), come
				// before nobody's own exec, which the stream has.
				for _, r := range rs {
					if r["pid"] == float64(ru.Process.Pid) || r["pid"] == float64(pl.Process.Pid) {
						t.Errorf("nobody's stream shows root's runuser or perl: %v", r)
					}
				}
				return find(rs, child) != nil && find(rs, dropped) != nil && find(rs, setuidExec) != nil && find(rs, mine) != nil
			}, "nobody's stream lacks runuser's child's, perl's child's, the setuid exec's or its own exec:\n%s", theirs.out)
			rs := theirs.rawRecords(t)

			// The parent's argv, as it was at its exec, only when its
			// context says it is wholly nobody's and it was exec'd so:
			// root's may have overwritten it since, and /proc shows the
			// new one. perl, exec'd by root, became nobody since: its
			// exec's argv is withheld too (events.ExecInfo.OtherIDs).
			for _, c := range []struct {
				name, comm string
				f          func(r map[string]any) bool
				argv       bool
			}{{"root's runuser", "runuser", child, false}, {"root's perl become nobody", "perl", dropped, false}} {
				r := find(rs, c.f)
				p := recordParent(r)
				switch {
				case hidepid && (p != nil || !slices.Equal(withheldOf(r), []string{"parent"})):
					t.Errorf("hidepid: nobody's exec under %s shows its parent %v, withheld %v; want none, withheld [parent]", c.name, p, withheldOf(r))
				case !hidepid && (p == nil || p["comm"] != c.comm || (p["argv"] != nil) != c.argv):
					t.Errorf("nobody's exec under %s: parent's comm or argv not as wanted (argv shown: %v): %v", c.name, c.argv, r)
				case !hidepid && (p["exe"] != nil || p["working_directory"] != nil || p["interactive"] != nil ||
					!slices.Equal(withheldOf(r), parentWithheld(p, c.argv))):
					t.Errorf("nobody's exec under %s shows the parent's exe %v, working directory %v and interactive %v (ids %v), withheld %v; want none, withheld %v",
						c.name, p["exe"], p["working_directory"], p["interactive"], p["real_user"], withheldOf(r), parentWithheld(p, c.argv))
				}
			}
			r := find(rs, child)
			if r["working_directory"] != secret || r["exe"] == nil {
				// The child is wholly nobody's and dumpable: its own cwd,
				// root's directory, is nobody's to read.
				t.Errorf("nobody's exec under root's runuser: exe %v, working directory %v, want its own (%s)", r["exe"], r["working_directory"], secret)
			}

			r = find(rs, setuidExec)
			// Neither interactive nor the namespaces: /proc/PID/fd and ns need
			// ptrace access; nor its arguments, which a process running
			// with root's rights chose. Under hidepid, nor the tokens of
			// its parent (this test, which the daemon knows) and of its
			// leaders (null when not known: nothing withheld).
			want := []string{"argv", "exe", "interactive", "mnt_ns", "pid_ns", "working_directory"}
			if hidepid {
				want = []string{"argv", "exe", "interactive", "mnt_ns", "parent_token", "pid_ns", "working_directory"}
				for _, k := range []string{"session_leader", "group_leader"} {
					if l, _ := r[k].(map[string]any); l == nil || l["entity_id"] != nil {
						t.Errorf("hidepid: nobody's setuid exec shows %s %v; want its pid, and its entity_id withheld or null", k, r[k])
					} else if _, ok := l["entity_id"]; !ok {
						want = append(want, k+".entity_id")
					}
				}
				slices.Sort(want)
			}
			// Its parent (this test, root's) is withheld as the rule for
			// parents says.
			itself := slices.DeleteFunc(withheldOf(r), func(k string) bool { return k == "parent" || strings.HasPrefix(k, "parent.") })
			_, interactive := r["interactive"]
			_, pidNS := r["pid_ns"]
			_, mntNS := r["mnt_ns"]
			_, parentToken := r["parent_token"]
			if r["exe"] != nil || r["working_directory"] != nil || interactive || pidNS || mntNS || r["argv"] != nil || hidepid && parentToken || !slices.Equal(itself, want) {
				t.Errorf("nobody's setuid exec (euid 0) in root's directory: exe %v, working directory %v, interactive %v, pid_ns %v, mnt_ns %v, argv %v, parent_token %v, withheld %v; want none of them shown, withheld %v",
					r["exe"], r["working_directory"], r["interactive"], r["pid_ns"], r["mnt_ns"], r["argv"], r["parent_token"], withheldOf(r), want)
			}

			r = find(rs, mine)
			if r["working_directory"] != ownDir || r["exe"] == nil || r["argv"] == nil || r["interactive"] == nil || r["pid_ns"] == nil || r["mnt_ns"] == nil || r["parent_token"] == nil {
				t.Errorf("nobody's own exec: exe %v, working directory %v, argv %v, interactive %v, pid_ns %v, mnt_ns %v, parent_token %v, want all (its own in %s): %v",
					r["exe"], r["working_directory"], r["argv"], r["interactive"], r["pid_ns"], r["mnt_ns"], r["parent_token"], ownDir, r)
			}

			// Root's stream is whole.
			got := findOrLost(t, root, child, execOf(su.Process.Pid, 0, mark))
			if got == nil {
				return
			}
			rr, rsu := got[0], got[1]
			if p := recordParent(rr); p == nil || p["working_directory"] != secret || p["exe"] != runuser && p["exe"] == nil || rr["withheld"] != nil {
				t.Errorf("root's stream: the exec under runuser has parent %v, withheld %v; want runuser's exe and working directory %s", p, rr["withheld"], secret)
			}
			if rsu["working_directory"] != secret || rsu["exe"] == nil || rsu["interactive"] == nil || rsu["pid_ns"] == nil || rsu["mnt_ns"] == nil || rsu["parent_token"] == nil || rsu["withheld"] != nil {
				t.Errorf("root's stream: the setuid exec has exe %v, working directory %v, interactive %v, pid_ns %v, mnt_ns %v, parent_token %v, withheld %v; want all, %s",
					rsu["exe"], rsu["working_directory"], rsu["interactive"], rsu["pid_ns"], rsu["mnt_ns"], rsu["parent_token"], rsu["withheld"], secret)
			}
		})
	}
}

// newUser creates a user with useradd (no home) and returns its uid; the
// user is removed when the test ends.
func newUser(t *testing.T) uint32 {
	t.Helper()
	name := fmt.Sprintf("svt%d", os.Getpid()%1000000)
	if out, err := exec.Command("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		testenv.Skip(t, "useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	var uid uint32
	if _, err := fmt.Sscan(string(out), &uid); err != nil {
		t.Fatal(err)
	}
	return uid
}

// TestIntegrationEventsOtherUserInClaim: a claim of nobody's whose
// workload (through a setuid bash and setpriv) runs a process as another
// user, made for the test: nobody's stream has the exec it made itself
// (setpriv, real uid nobody) and nothing of that process once it is the
// other user's (its exec as that user, its exit), although the process is
// in nobody's claim; root's stream has them, in the claim, with the other
// user's uid.
func TestIntegrationEventsOtherUserInClaim(t *testing.T) {
	testenv.RequireRoot(t)
	other, suid := newUser(t), setuidBash(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Skip(t, "no setpriv: %v", err)
	}
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}
	theirs := startStream(t, d, cred, "--json")
	root := startStream(t, d, nil, "--json", "--kind", "exec,exit")
	mark := fmt.Sprintf("other-%d", os.Getpid())
	c := launchGated(t, d, cred, fmt.Sprintf(`%s -p -c "%s --reuid %d --regid %d --clear-groups /bin/sh -c 'exit 3' %s"; exit 0`,
		suid, setpriv, other, other, mark))
	// The process that becomes the other user's: setpriv, then its sh.
	var pid float64
	testenv.Eventually(t, 30*time.Second, func() bool {
		r := find(theirs.rawRecords(t), func(r map[string]any) bool {
			return r["kind"] == "exec" && r["comm"] == "setpriv" && r["claim"] == c.ID
		})
		if r != nil {
			pid = r["pid"].(float64)
		}
		return r != nil && find(theirs.rawRecords(t), func(r map[string]any) bool {
			return r["kind"] == "claim" && r["claim"] == c.ID && r["state"] == "released"
		}) != nil
	}, "nobody's stream lacks its setpriv exec or its claim's release:\n%s", theirs.out)
	for _, r := range theirs.rawRecords(t) {
		ru, _ := r["real_user"].(map[string]any)
		if r["uid"] == float64(other) || r["pid"] == pid && (r["kind"] == "exit" || r["kind"] == "exec" && ru["id"] != fmt.Sprint(nobody)) {
			t.Errorf("nobody's stream shows the other user's process: %v", r)
		}
	}
	got := findOrLost(t, root,
		func(r map[string]any) bool { return r["kind"] == "exec" && r["pid"] == pid && r["comm"] == "sh" },
		func(r map[string]any) bool { return r["kind"] == "exit" && r["pid"] == pid })
	if got == nil {
		return
	}
	sh, exit := got[0], got[1]
	for _, r := range []map[string]any{sh, exit} {
		if r["uid"] != float64(other) || r["claim"] != c.ID || r["kind"] == "exit" && r["exit_code"] != float64(3) {
			t.Errorf("root's stream: %v, want uid %d in claim %s (exit 3)", r, other, c.ID)
		}
	}
}

// launchGated launches script (sh) as cred, in a workload that waits for
// a gate the test opens once the launch has answered: the children the
// script makes are born in the admitted claim (one forked before the
// claim is admitted is cred's by uid, in no claim).
func launchGated(t *testing.T, d *testDaemon, cred *syscall.Credential, script string) api.Claim {
	t.Helper()
	gate := t.TempDir()
	if err := os.Chmod(gate, 0o755); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(gate, "open")
	code, out, errs := d.run(t, cred, "launch", "--json", "--", "/bin/sh", "-c",
		"while [ ! -e "+open+" ]; do /bin/sleep 0.05; done; "+script)
	if code != 0 {
		t.Fatalf("launch as %v: exit %d: %s", cred, code, errs)
	}
	var c api.Claim
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}
