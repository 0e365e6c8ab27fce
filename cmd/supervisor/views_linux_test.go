package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/view"
)

// row returns the line of a list's output about claim id ("" if none).
func row(out, id string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	return ""
}

// TestIntegrationListViews runs the human views against a daemon: list
// shows live claims with age and result, -a finished ones with why they
// ended, --owner and --state filter, show prints one claim in full.
func TestIntegrationListViews(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	live := d.launch(t, "--owner", "alpha", "--", "sleep", "600")
	gone := d.launch(t, "--owner", "beta", "--", "sleep", "600")
	wall := d.launch(t, "--owner", "beta", "--wall-clock", "1s", "--", "sleep", "600")
	job := d.launch(t, "--owner", "gamma", "--detach", "--", "sh", "-c", "sleep 1; exit 3")
	if code, _, errs := d.run(t, nil, "release", "--grace", "0s", gone.ID); code != 0 {
		t.Fatalf("release: %d %s", code, errs)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		return d.claim(t, wall.ID).State == store.Released && d.claim(t, job.ID).State == store.Exited
	}, "the wall clock did not release %s, or the job %s did not exit", wall.ID, job.ID)

	code, out, errs := d.run(t, nil, "list")
	if code != 0 || !regexp.MustCompile(`^ID +KIND +STATE +AGE +PID +VERDICT +USER +OWNER +RESULT +COMMAND\n`).MatchString(out) {
		t.Fatalf("list = %d %q %q", code, out, errs)
	}
	if r := row(out, live.ID); !regexp.MustCompile(`grant +running +\d+s +` + strconv.Itoa(int(live.Pid)) + ` +OWNED +root +alpha +- +sleep 600$`).MatchString(r) {
		t.Errorf("list: the live claim's row is %q", r)
	}
	for _, id := range []string{gone.ID, wall.ID, job.ID} {
		if r := row(out, id); r != "" {
			t.Errorf("list (live claims only) shows a finished claim: %q", r)
		}
	}

	code, out, _ = d.run(t, nil, "list", "-a")
	for id, want := range map[string]string{
		gone.ID: " released: requested ",
		wall.ID: " released: wall clock ",
		job.ID:  " exited (3) ",
		live.ID: " - ",
	} {
		if r := row(out, id); code != 0 || !strings.Contains(r, want) {
			t.Errorf("list -a: %s's row is %q, want %q in it", id, r, want)
		}
	}

	code, out, _ = d.run(t, nil, "list", "-a", "--owner", "beta")
	if code != 0 || row(out, gone.ID) == "" || row(out, wall.ID) == "" || row(out, live.ID) != "" || row(out, job.ID) != "" {
		t.Errorf("list -a --owner beta = %d\n%s\nwant the two claims of beta only", code, out)
	}
	code, out, _ = d.run(t, nil, "list", "--state", "released")
	if code != 0 || row(out, gone.ID) == "" || row(out, wall.ID) == "" || row(out, live.ID) != "" {
		t.Errorf("list --state released = %d\n%s\nwant the released claims only", code, out)
	}
	if code, _, errs := d.run(t, nil, "list", "--state", "bogus"); code != exitUsage {
		t.Errorf("list --state bogus = %d %q, want %d", code, errs, exitUsage)
	}

	code, out, errs = d.run(t, nil, "show", wall.ID)
	out = regexp.MustCompile(`(?m)^( *[a-z ]+:) +`).ReplaceAllString(out, "$1 ")
	for _, want := range []string{
		"id: " + wall.ID + "\n", "state: released\n", "result: released: wall clock",
		"owner: beta\n", "command: sleep 600\n", "root: " + strconv.Itoa(int(wall.Pid)) + " " + wall.Token.String() + "\n",
		"wall clock: 1s, deadline ", "created: ", "verdict: OWNED: ", "released: dead true",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show %s = %d %q; lacks %q\n%s", wall.ID, code, errs, want, out)
		}
	}
	if code, _, _ := d.run(t, nil, "show", "g-aaaaaaaaaaaa"); code != exitNoProcess {
		t.Errorf("show of no claim = %d, want %d", code, exitNoProcess)
	}
}

// TestIntegrationListEscapes: an owner label carrying a terminal escape
// reaches list and show neutralised.
func TestIntegrationListEscapes(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	c := d.launch(t, "--owner", "\x1b[41mred", "--", "sleep", "600")
	for _, args := range [][]string{{"list"}, {"show", c.ID}} {
		code, out, _ := d.run(t, nil, args...)
		if code != 0 || strings.Contains(out, "\x1b") || !strings.Contains(out, "?[41mred") {
			t.Errorf("%s = %d %q, want the owner with its escape neutralised", args[0], code, out)
		}
	}
}

// TestIntegrationListWatch: list --watch draws the list, draws it again
// when a claim ends, and stops cleanly (exit 0) on Ctrl-C.
func TestIntegrationListWatch(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	c := d.launch(t, "--", "sleep", "600")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testenv.Buffer
	done := make(chan int)
	go func() {
		done <- runMain(ctx, &cliEnv{stdout: &out, stderr: &out}, []string{"list", "--watch", "--socket", sock})
	}()
	testenv.Eventually(t, 10*time.Second, func() bool { return row(out.String(), c.ID) != "" }, "list --watch never showed %s:\n%s", c.ID, out.String())
	if code, _, errs := d.run(t, nil, "release", "--grace", "0s", c.ID); code != 0 {
		t.Fatalf("release: %d %s", code, errs)
	}
	lastFrame := func() string {
		s := out.String()
		return s[strings.LastIndex(s, "ID "):]
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Count(out.String(), "ID ") >= 2 && row(lastFrame(), c.ID) == ""
	}, "list --watch did not redraw without the released claim:\n%s", out.String())
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("list --watch stopped by its context: exit %d, want 0\n%s", code, out.String())
	}
}

// TestIntegrationTreeViews: tree shows a claimed process's claim id and
// command line, and tokens only with --tokens.
func TestIntegrationTreeViews(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	c := d.launch(t, "--", "sh", "-c", "sleep 600 & wait")
	pid := strconv.Itoa(int(c.Pid))
	var out string
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, out, _ = d.run(t, nil, "tree", pid)
		return strings.Contains(out, "sleep ["+c.ID+"]  sleep 600")
	}, "tree %s does not show the claimed sleep with its claim and command line:\n%s", pid, out)
	if !strings.Contains(out, pid+" sh ["+c.ID+"]  sh -c sleep 600 & wait\n") || strings.Contains(out, "v1:") {
		t.Errorf("tree %s:\n%s\nwant the root with its claim id and command line, and no token", pid, out)
	}
	// Another user sees the processes, not root's claim.
	if code, theirs, errs := d.run(t, asNobody, "tree", pid); code != 0 || !strings.Contains(theirs, "sleep 600") || strings.Contains(theirs, c.ID) {
		t.Errorf("tree %s as nobody = %d %s\n%s\nwant the processes without root's claim id", pid, code, errs, theirs)
	}
	code, out, _ := d.run(t, nil, "tree", "--tokens", pid)
	if code != 0 || !strings.Contains(out, c.Token.String()) {
		t.Errorf("tree --tokens = %d\n%s\nwant the root's token %s", code, out, c.Token)
	}

	// Without a daemon: one /proc scan, no claim ids, command lines still.
	argv, _, err := procfs.ReadCmdline("/proc", 1)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "tree", "1", "--mechanism", "proc")
	if want := "  " + view.Sanitize(strings.Join(argv, " ")) + "\n"; code != 0 || len(argv) == 0 || !strings.Contains(out, want) {
		t.Errorf("local tree 1 = %d %q\n%s\nwant pid 1's command line %q", code, errs, out, want)
	}
}
