package view

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/userdb"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func TestAge(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {59 * time.Second, "59s"}, {time.Minute, "1m"},
		{59*time.Minute + 59*time.Second, "59m"}, {time.Hour, "1h"}, {47 * time.Hour, "47h"},
		{48 * time.Hour, "2d"}, {400 * 24 * time.Hour, "400d"},
	} {
		if got := Age(c.d); got != c.want {
			t.Errorf("Age(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"sleep 600", 0, "sleep 600"},
		{"sleep 600", 9, "sleep 600"},
		{"sleep 600", 8, "sleep …"}, // "…" may take two columns
		{"sleep 600", 7, "sleep…"},
		// Every character but ASCII counts two columns, what a wide
		// one takes: no UTF-8 sequence is split.
		{"ééééé", 10, "ééééé"},
		{"ééééé", 9, "ééé…"},
		{"ééééé", 8, "ééé…"},
		{"aé", 3, "aé"},
		{"日本語", 5, "日…"},
		{"\xff\xfeab", 5, "\xff…"}, // a byte that is not UTF-8 counts as a character
		{"ab", 2, "ab"},
		{"abc", 2, "…"},
		{"abc", 1, "a"}, // no room for the mark
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestResult(t *testing.T) {
	code := func(n int) *int { return &n }
	deadline := t0.Add(-time.Minute)
	for _, c := range []struct {
		name string
		cl   api.Claim
		want string
	}{
		{"running", api.Claim{State: store.Running}, "-"},
		{"running with a wall clock", api.Claim{State: store.Running, Deadline: t0.Add(90 * time.Second)}, "wall clock in 1m"},
		{"running past its wall clock", api.Claim{State: store.Running, Deadline: deadline}, "wall clock due"},
		{"releasing", api.Claim{State: store.Releasing, GraceUntil: t0.Add(8 * time.Second)}, "grace ends in 8s"},
		{"survivors", api.Claim{State: store.Survivors, Release: &api.Release{Survivors: make([]api.Instance, 2)}}, "2 survivors"},
		{"one unproven", api.Claim{State: store.Survivors, Release: &api.Release{Unproven: make([]api.Instance, 1)}}, "1 unproven left"},
		{"lists cut", api.Claim{State: store.Survivors, Release: &api.Release{Survivors: make([]api.Instance, 1), SurvivorsTotal: 3,
			Unproven: make([]api.Instance, 40), UnprovenTotal: 171}}, "3 survivors, 171 unproven"},
		{"unverifiable", api.Claim{State: store.Unverifiable, LastVerdict: &api.Judgement{Result: verdict.Unverifiable, Reason: "ticks only"}}, "UNVERIFIABLE: ticks only"},
		{"dropped", api.Claim{State: store.Dropped, LastVerdict: &api.Judgement{Result: verdict.Foreign, Reason: "start time differs"}}, "FOREIGN: start time differs"},
		{"exit code", api.Claim{State: store.Exited, ExitCode: code(3)}, "exited (3)"},
		{"exit code 0", api.Claim{State: store.Exited, ExitCode: code(0)}, "exited (0)"},
		{"killed", api.Claim{State: store.Exited, ExitSignal: 9}, "killed by SIGKILL"},
		{"unknown signal", api.Claim{State: store.Exited, ExitSignal: 200}, "killed by signal 200"},
		{"exit unknown", api.Claim{State: store.Exited, RetiredReason: "exited while not watched"}, "exited: exited while not watched"},
		{"retired", api.Claim{State: store.Retired, RetiredReason: "FOREIGN: reissued"}, "retired: FOREIGN: reissued"},
		{"released on request", api.Claim{State: store.Released, Release: &api.Release{Dead: true, Cause: "requested"}}, "released: requested"},
		{"released by its wall clock", api.Claim{State: store.Released, Release: &api.Release{Dead: true, Cause: "wall clock", Escalated: true}}, "released: wall clock (SIGKILL needed)"},
		{"released, holder gone", api.Claim{State: store.Released, Release: &api.Release{Dead: true, Cause: "holder gone", Unproven: make([]api.Instance, 2)}}, "released: holder gone (2 unproven processes left)"},
		{"released, record cut", api.Claim{State: store.Released, Release: &api.Release{Cause: "requested", Unproven: make([]api.Instance, 40), UnprovenTotal: 1500}}, "released: requested (1500 unproven processes left)"},
		// Records older than the cause: what the record shows.
		{"old record, root gone", api.Claim{State: store.Released, Release: &api.Release{Ownership: verdict.Gone}}, "released: root exited"},
		{"old record, wall clock", api.Claim{State: store.Released, Deadline: deadline, Release: &api.Release{Ownership: verdict.Owned, At: deadline}}, "released: wall clock"},
		{"old record, other", api.Claim{State: store.Released, Release: &api.Release{Ownership: verdict.Owned, At: deadline}}, "released: released"},
		{"no release record", api.Claim{State: store.Released}, "released: unknown"},
	} {
		if got := Result(c.cl, t0); got != c.want {
			t.Errorf("%s: Result = %q, want %q", c.name, got, c.want)
		}
	}
}

// withUsers makes the views name users from a passwd file of these lines.
func withUsers(t *testing.T, passwd string) {
	dir := t.TempDir()
	for name, text := range map[string]string{"passwd": passwd, "group": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := users
	users = userdb.New(filepath.Join(dir, "passwd"), filepath.Join(dir, "group"))
	t.Cleanup(func() { users = old })
}

// TestClaims: a row a claim, USER naming who created it (by the local
// user database, else the uid) before OWNER, the label its creator chose:
// rvb2 launching with --owner rvb1 does not pass for rvb1.
func TestClaims(t *testing.T) {
	withUsers(t, "root:x:0:0::/root:/bin/sh\nrvb1:x:1000:1000::/home/rvb1:/bin/sh\nrvb2:x:1001:1001::/home/rvb2:/bin/sh\n")
	code := 3
	cs := []api.Claim{
		{ID: "g-aaaaaaaaaaaa", Kind: store.Grant, State: store.Running, CreatedAt: t0.Add(-5 * time.Minute), Pid: 42, UID: 1000,
			Owner: "rvb1", Argv: []string{"sleep", "600"}, LastVerdict: &api.Judgement{Result: verdict.Owned}},
		{ID: "g-cccccccccccc", Kind: store.Grant, State: store.Running, CreatedAt: t0.Add(-time.Minute), Pid: 44, UID: 1001,
			Owner: "rvb1", Argv: []string{"sleep", "600"}, LastVerdict: &api.Judgement{Result: verdict.Owned}},
		{ID: "j-bbbbbbbbbbbb", Kind: store.Job, State: store.Exited, CreatedAt: t0.Add(-3 * 24 * time.Hour), Pid: 43, UID: 4000,
			ExitCode: &code, Argv: []string{"sh", "-c", strings.Repeat("x", 100)}},
		{ID: "j-dddddddddddd", Kind: store.Job, State: store.Exited, CreatedAt: t0.Add(-time.Hour), Pid: 45, UID: 0,
			Owner: "rvb1", ExitCode: &code, Argv: []string{"true"}},
	}
	var b strings.Builder
	Claims(&b, cs, t0)
	want := "ID              KIND   STATE    AGE  PID  VERDICT  USER  OWNER  RESULT      COMMAND\n" +
		"g-aaaaaaaaaaaa  grant  running  5m   42   OWNED    rvb1  rvb1   -           sleep 600\n" +
		"g-cccccccccccc  grant  running  1m   44   OWNED    rvb2  rvb1   -           sleep 600\n" +
		"j-bbbbbbbbbbbb  job    exited   3d   43   -        4000  -      exited (3)  sh -c " + strings.Repeat("x", 52) + "…\n" +
		"j-dddddddddddd  job    exited   1h   45   -        root  rvb1   exited (3)  true\n"
	if got := b.String(); got != want {
		t.Errorf("Claims =\n%s\nwant\n%s", got, want)
	}
}

func TestFilter(t *testing.T) {
	cs := []api.Claim{{ID: "a", State: store.Running}, {ID: "b", State: store.Released}, {ID: "c", State: store.Survivors}}
	open := func(s store.State) bool { return s != store.Released }
	ids := func(cs []api.Claim) (s string) {
		for _, c := range cs {
			s += c.ID
		}
		return s
	}
	if got := ids(Filter(cs, false, open)); got != "ac" {
		t.Errorf("Filter(live) = %q, want \"ac\"", got)
	}
	if got := ids(Filter(cs, true, open)); got != "abc" {
		t.Errorf("Filter(all) = %q, want \"abc\"", got)
	}
	if ids(cs) != "abc" {
		t.Errorf("Filter changed its input: %q", ids(cs))
	}
}

func TestShow(t *testing.T) {
	tok := token.Token{Start: 116, Prec: token.Ticks}
	cl := api.Claim{
		ID: "g-aaaaaaaaaaaa", Kind: store.Grant, State: store.Released, Owner: "o", UID: 1000, GID: 100,
		Argv: []string{"sh", "-c", "echo hi"}, Cwd: "/tmp", Pid: 42, Token: tok, Cgroup: "/sys/fs/cgroup/x",
		CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0.Add(-time.Minute),
		Holder: &api.Instance{Pid: 7, Token: tok}, WallClock: api.Duration(time.Hour), Deadline: t0,
		LastVerdict: &api.Judgement{Result: verdict.Owned, Reason: "pidfs inode matches", Mechanism: "pidfd", At: t0},
		Release:     &api.Release{Dead: true, Escalated: true, Ownership: verdict.Owned, At: t0, Cause: "holder gone", Unproven: []api.Instance{{Pid: 9, Token: tok, Reason: "protected"}}},
		Members:     []api.Member{{Pid: 43, Token: tok, Parent: 42, BornAt: t0.Add(-time.Hour)}},
		Limits:      []api.Limit{{Name: "nofile", Soft: 1024, Hard: ^uint64(0)}},
		Started: &api.StartEnv{Umask: "0077", Nice: 5, Policy: "SCHED_BATCH", IOPrio: "best-effort/7", OOMScoreAdj: 200,
			CPUs: "0-1", SeccompFilters: 2},
	}
	var b strings.Builder
	Show(&b, cl, t0)
	out := fields(b.String())
	for _, want := range []string{
		"id: g-aaaaaaaaaaaa\n",
		"result: released: holder gone (1 unproven process left)\n",
		"command: sh -c \"echo hi\"\n",
		"root: 42 " + tok.String() + "\n",
		"holder: 7 " + tok.String() + "\n",
		"wall clock: 1h0m0s, deadline " + t0.Local().Format(time.RFC3339) + " (0s ago)\n",
		"created: " + t0.Add(-time.Hour).Local().Format(time.RFC3339) + " (1h ago)\n",
		"verdict: OWNED: pidfs inode matches (by pidfd), " + t0.Local().Format(time.RFC3339) + " (0s ago)\n",
		"released: dead true, escalated true, root OWNED",
		"unproven: 9 " + tok.String() + " (protected)\n",
		"limit: nofile soft 1024 hard unlimited\n",
		"started with: umask 0077, nice 5, SCHED_BATCH, I/O best-effort/7, oom_score_adj 200, CPUs 0-1, 2 seccomp filters\n",
		"members: 1\n",
		"  member: 43 " + tok.String() + " (parent 42, born ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Show lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct {
		argv     []string
		redacted bool
		want     string
	}{
		{[]string{"db", "--password=[REDACTED]"}, true, "command: db --password=[REDACTED]  (arguments redacted)\n"},
		{[]string{"db", "--password=[REDACTED]"}, false, "command: db --password=[REDACTED]\n"},
	} {
		b.Reset()
		Show(&b, api.Claim{ID: "g-r", Kind: store.Grant, Argv: c.argv, ArgsRedacted: c.redacted}, t0)
		if out := fields(b.String()); !strings.Contains(out, c.want) {
			t.Errorf("Show(argv %q, redacted %v) lacks %q:\n%s", c.argv, c.redacted, c.want, out)
		}
	}
	b.Reset()
	Show(&b, api.Claim{ID: "g-b", Kind: store.Grant, State: store.Running}, t0)
	if out := fields(b.String()); !strings.Contains(out, "root: not started\n") || !strings.Contains(out, "holder: none (unbound)\n") {
		t.Errorf("Show of an unstarted, unbound grant:\n%s", out)
	}
}

// fields folds the padding after each "key:" of Show's output to one space.
func fields(s string) string {
	return regexp.MustCompile(`(?m)^( *[a-z ]+:) +`).ReplaceAllString(s, "$1 ")
}

func TestLaunched(t *testing.T) {
	var b strings.Builder
	tok := token.Token{Start: 116, Prec: token.Ticks}
	Launched(&b, api.Claim{ID: "g-aaaaaaaaaaaa", Pid: 42, Token: tok})
	if got, want := b.String(), "g-aaaaaaaaaaaa 42 "+tok.String()+"\n"; got != want {
		t.Errorf("Launched = %q, want %q", got, want)
	}
}

func TestVerdictLine(t *testing.T) {
	var b strings.Builder
	Verdict(&b, verdict.Verdict{Result: verdict.Foreign, Reason: "start time differs: the pid was reissued", Mechanism: "local:pidfd"})
	if got, want := b.String(), "FOREIGN: start time differs: the pid was reissued (by local:pidfd)\n"; got != want {
		t.Errorf("Verdict = %q, want %q", got, want)
	}
}

// TestStatusStable: the counts come in kind, then state order, whatever
// order the map iterates in.
func TestStatusStable(t *testing.T) {
	st := api.Status{Counts: map[store.Kind]map[store.State]int{}}
	for _, k := range store.Kinds() {
		st.Counts[k] = map[store.State]int{}
		for i, s := range store.States() {
			st.Counts[k][s] = i + 1
		}
	}
	var first strings.Builder
	Status(&first, st)
	if !strings.Contains(first.String(), "  grant dropped: 6\n  grant exited: 7\n") ||
		strings.Index(first.String(), "  grant unverifiable") > strings.Index(first.String(), "  job dropped") {
		t.Errorf("Status counts not in kind, state order:\n%s", first.String())
	}
	for range 20 {
		var b strings.Builder
		Status(&b, st)
		if b.String() != first.String() {
			t.Fatalf("Status printed\n%s\nthen\n%s", first.String(), b.String())
		}
	}
}

func TestTreeOptions(t *testing.T) {
	tok := token.Token{Start: 116, Prec: token.Ticks}
	leaf := &lineage.TreeNode{Pid: 3, Comm: "sleep", Token: tok, Root: "g-aaaaaaaaaaaa"}
	gone := &lineage.TreeNode{Pid: 4, Comm: "true", Token: tok, Exited: true}
	root := &lineage.TreeNode{Pid: 2, Comm: "sh", Token: tok, Children: []*lineage.TreeNode{leaf, gone}}
	cmdline := func(pid int32, _ token.Token) string { return fmt.Sprintf("cmd-of-%d with arguments", pid) }
	for _, c := range []struct {
		name string
		opt  TreeOptions
		want string
	}{
		{"plain", TreeOptions{}, "# lineage by daemon\n2 sh\n├─ 3 sleep [g-aaaaaaaaaaaa]\n└─ 4 true (exited)\n"},
		{"tokens", TreeOptions{Tokens: true}, "# lineage by daemon\n2 sh  " + tok.String() + "\n├─ 3 sleep [g-aaaaaaaaaaaa]  " + tok.String() + "\n└─ 4 true (exited)  " + tok.String() + "\n"},
		{"command lines", TreeOptions{Cmdline: cmdline}, "# lineage by daemon\n2 sh  cmd-of-2 with arguments\n├─ 3 sleep [g-aaaaaaaaaaaa]  cmd-of-3 with arguments\n└─ 4 true (exited)\n"},
		{"cut to 24 columns", TreeOptions{Cmdline: cmdline, Width: 24}, "# lineage by daemon\n2 sh  cmd-of-2 with ar…\n├─ 3 sleep [g-aaaaaa…\n└─ 4 true (exited)\n"},
	} {
		var b strings.Builder
		Tree(&b, "daemon", root, nil, c.opt)
		if got := b.String(); got != c.want {
			t.Errorf("%s: Tree =\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
	// A node that carries its arguments (the daemon's, redacted) shows
	// them and is never looked up.
	leaf.Args, leaf.ArgsRedacted = []string{"sleep", "--password=[REDACTED]", "\x1b[2J"}, true
	for _, c := range []struct {
		name string
		opt  TreeOptions
		want string
	}{
		{"args, no lookup", TreeOptions{}, "# lineage by daemon\n2 sh\n├─ 3 sleep [g-aaaaaaaaaaaa]  sleep --password=[REDACTED] ?[2J\n└─ 4 true (exited)\n"},
		{"args win over a lookup", TreeOptions{Cmdline: cmdline}, "# lineage by daemon\n2 sh  cmd-of-2 with arguments\n├─ 3 sleep [g-aaaaaaaaaaaa]  sleep --password=[REDACTED] ?[2J\n└─ 4 true (exited)\n"},
	} {
		var b strings.Builder
		Tree(&b, "daemon", root, nil, c.opt)
		if got := b.String(); got != c.want {
			t.Errorf("%s: Tree =\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

// TestWatch writes a frame when what render draws changes, and only then;
// a render error ends it with that error, the context's end with nil.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	frames := []string{"a\n", "a\n", "a\n", "b\n", "b\n", "c\n"}
	calls := 0
	render := func(w io.Writer) error {
		mu.Lock()
		defer mu.Unlock()
		f := frames[min(calls, len(frames)-1)]
		calls++
		if calls == len(frames)+3 {
			cancel()
		}
		_, err := io.WriteString(w, f)
		return err
	}
	var out testenv.Buffer
	if err := Watch(ctx, &out, time.Millisecond, render); err != nil {
		t.Fatalf("Watch = %v, want nil when its context ends", err)
	}
	if got, want := out.String(), "a\n\nb\n\nc\n"; got != want {
		t.Errorf("Watch wrote %q, want %q (a frame per change)", got, want)
	}
	boom := errors.New("daemon gone")
	err := Watch(context.Background(), io.Discard, time.Millisecond, func(io.Writer) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Watch with a failing render = %v, want %v", err, boom)
	}
}

// TestJSONNoHTMLEscapes: &, < and > reach a terminal as they are.
func TestJSONNoHTMLEscapes(t *testing.T) {
	var b strings.Builder
	if err := JSON(&b, map[string]string{"argv": "a && b <c>"}, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `{"argv":"a && b <c>"}`+"\n"; got != want {
		t.Errorf("JSON = %q, want %q", got, want)
	}
	if err := JSON(&b, func() {}, ""); err == nil {
		t.Error("JSON of a func: no error")
	}
}

func TestJoin(t *testing.T) {
	if got, want := Join([]store.State{store.Running, store.Released}, "|"), "running|released"; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
}

// TestEnded: wait's line is the claim's id, its state and list's result.
func TestEnded(t *testing.T) {
	code := 3
	for _, c := range []struct {
		cl   api.Claim
		want string
	}{
		{api.Claim{ID: "j-a", State: store.Exited, ExitCode: &code}, "j-a exited (3)\n"},
		{api.Claim{ID: "j-a", State: store.Exited, ExitSignal: 9}, "j-a exited: killed by SIGKILL\n"},
		{api.Claim{ID: "g-a", State: store.Released, Release: &api.Release{Dead: true, Cause: "wall clock"}}, "g-a released: wall clock\n"},
		{api.Claim{ID: "j-a", State: store.Retired, RetiredReason: "FOREIGN: \x1b[2J"}, "j-a retired: FOREIGN: ?[2J\n"},
		{api.Claim{ID: "g-a", State: store.Dropped, LastVerdict: &api.Judgement{Result: verdict.Foreign, Reason: "reissued"}}, "g-a dropped: FOREIGN: reissued\n"},
	} {
		var b strings.Builder
		Ended(&b, c.cl)
		if got := b.String(); got != c.want {
			t.Errorf("Ended(%+v) = %q, want %q", c.cl, got, c.want)
		}
	}
}

// TestCutKeepsMarks: a view's cut ends before a [REDACTED] mark, not
// inside it ("--password=[RED…" read as a password).
func TestCutKeepsMarks(t *testing.T) {
	s := "db --password=[REDACTED] x"
	for n := len("db --password=") + 3; n < len("db --password=[REDACTED]")+2; n++ {
		got := Cut(s, n)
		if strings.Contains(got, "[") && !strings.Contains(got, "[REDACTED]") {
			t.Errorf("Cut(%q, %d) = %q, a part of the mark", s, n, got)
		}
	}
}
