package logfeed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// lineBuf collects a Logger's output.
type lineBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lineBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes every line written so far.
func (b *lineBuf) lines(t testing.TB) []map[string]any {
	t.Helper()
	b.mu.Lock()
	data := append([]byte(nil), b.buf.Bytes()...)
	b.mu.Unlock()
	return decodeLines(t, data)
}

func decodeLines(t testing.TB, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// get returns the value at a dotted path of nested objects.
func get(m map[string]any, path string) (any, bool) {
	var cur any = m
	for len(path) > 0 {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		key := path
		if i := bytes.IndexByte([]byte(path), '.'); i >= 0 && path != "@timestamp" {
			key, path = path[:i], path[i+1:]
		} else {
			path = ""
		}
		if cur, ok = obj[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func getString(m map[string]any, path string) string {
	v, _ := get(m, path)
	s, _ := v.(string)
	return s
}

func getInt(m map[string]any, path string) (int64, bool) {
	v, ok := get(m, path)
	if !ok {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func newTestLogger(t testing.TB, cfg Config) (*Logger, *lineBuf) {
	t.Helper()
	out := &lineBuf{}
	if cfg.Writer == nil {
		cfg.Writer = out
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, out
}

func flush(t testing.TB, l *Logger) {
	t.Helper()
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// allActions lists every kind of line the feed writes.
var allActions = []string{
	ActionProcessStarted, ActionProcessExec, ActionProcessEnded, ActionVerdict,
	ActionSignalSent, ActionTeardown, ActionReconcile, ActionEventsLost,
	ActionLogLinesDropped, ActionSupervisorStarted, ActionSupervisorStopped,
	ActionInternalError, ActionLaunchRequested, ActionAdmitRequested, ActionReleaseRequested,
	ActionKillRequested, ActionReapRequested, ActionClaimState, ActionWallClock, ActionHolderExited, ActionJobExited,
}

// produceAll logs one or more lines of every kind: process events of real
// processes (see realEvents), and every verdict, signal, teardown,
// reconcile, loss and service line, plus a log_lines_dropped line exactly as
// the drain goroutine renders it.
func produceAll(t *testing.T, schema string) ([]map[string]any, *procEvents) {
	t.Helper()
	l, out := newTestLogger(t, Config{Schema: schema, ProcessEvents: AllKinds, Version: "0.1.0-test"})
	pe := realEvents(t)
	l.Service(Service{Mechanism: events.EBPF, Reason: "eBPF tracepoints attached"})
	for i := range pe.all {
		l.Event(&pe.all[i])
	}
	// Events with the context the eBPF source captures.
	for _, ev := range contextEvents(pe) {
		l.Event(&ev)
	}
	l.Event(&events.Event{Kind: events.Lost, Mechanism: events.Netlink, Count: 17})
	l.Lost(events.EBPF, 0)
	tok := pe.child
	for _, r := range []verdict.Result{verdict.Owned, verdict.Foreign, verdict.Gone, verdict.Unverifiable} {
		l.Verdict(verdict.Verdict{Pid: pe.childPid, Token: tok, Result: r, Reason: "reason for " + r.String(), Mechanism: "ebpf", Observed: tok})
	}
	l.Signal(Signal{Pid: pe.childPid, Token: tok, Signal: "SIGTERM", Mechanism: "pidfd", ClaimID: "g-abcdefghijkl"})
	l.VerdictFor("g-abcdefghijkl", verdict.Verdict{Pid: pe.childPid, Token: tok, Result: verdict.Owned, Reason: "claim root", Mechanism: "ebpf"})
	l.Signal(Signal{Pid: pe.childPid, Token: tok, Signal: "SIGSTOP", Mechanism: "pidfd", Err: errors.New("no such process")})
	v := verdict.Verdict{Pid: pe.childPid, Token: tok, Result: verdict.Owned, Reason: "pidfs inode matches", Mechanism: "ebpf"}
	m := actions.Member{Pid: pe.childPid, Token: pe.child}
	l.TeardownFor("g-abcdefghijkl", actions.Outcome{Verdict: v, Acted: true, Dead: true, Escalated: true, Targeted: []actions.Member{m},
		Signals: map[string]int{"SIGTERM": 1, "SIGCONT": 1, "SIGKILL": 1}, Mechanism: "lineage+cgroup.freeze"})
	l.Teardown(actions.Outcome{Verdict: v, Acted: true, Targeted: []actions.Member{m}, Survivors: []actions.Member{m},
		Unproven: []actions.Member{{Pid: 1, Token: token.Token{Start: 1, Prec: token.Ticks}, Reason: "protected"}}, Mechanism: "proc", Error: "survivor after SIGKILL",
		Incomplete: "events were lost while pid 1 lived: a process it forked then and left is not found"})
	fv := v
	fv.Result, fv.Reason = verdict.Foreign, "pid reissued"
	l.Teardown(actions.Outcome{Verdict: fv, Mechanism: "lineage"})
	runAs := uint32(1001)
	l.Request(Request{Action: ActionLaunchRequested, UID: 1001, GID: 1001, Pid: 4000, ClaimID: "g-abcdefghijkl", Owner: "ci", Kind: "grant",
		Argv: []string{"sleep", "60"}, RunAs: &runAs})
	l.Request(Request{Action: ActionAdmitRequested, UID: 1001, GID: 1001, Pid: 4000, ClaimID: "g-abcdefghijkm", Owner: "ci", Kind: "grant",
		Target: pe.childPid, TargetTok: pe.child})
	l.Request(Request{Action: ActionReleaseRequested, UID: 0, GID: 0, Pid: 4002, ClaimID: "g-abcdefghijkl", Owner: "ci", Kind: "grant"})
	l.Request(Request{Action: ActionReapRequested, UID: 0, GID: 0, Pid: 4002})
	l.Request(Request{Action: ActionKillRequested, UID: 1002, GID: 1002, Pid: 4001, Target: pe.childPid, TargetTok: pe.child,
		Err: errors.New("not held by the supervisor for this caller")})
	three := 3
	l.Claim(ClaimEvent{Action: ActionClaimState, ClaimID: "g-abcdefghijkl", Owner: "ci", Kind: "grant", UID: 1001, From: "running", State: "releasing", Pid: pe.childPid, Token: pe.child})
	l.Claim(ClaimEvent{Action: ActionWallClock, ClaimID: "g-abcdefghijkl", Owner: "ci", Kind: "grant", UID: 1001, Reason: "wall clock of 3s exceeded", Pid: pe.childPid, Token: pe.child})
	l.Claim(ClaimEvent{Action: ActionHolderExited, ClaimID: "g-abcdefghijkl", Owner: "ci", Kind: "grant", UID: 1001, Pid: 4000, Token: pe.child})
	l.Claim(ClaimEvent{Action: ActionJobExited, ClaimID: "j-abcdefghijkl", Owner: "ci", Kind: "job", UID: 1001, Pid: pe.childPid, ExitCode: &three})
	l.Reconcile(Reconcile{Seen: 9, Readopted: 2, TornDown: 1, Foreign: 1, Unverifiable: 3, AlreadyGone: 1, Failed: 1, Mechanism: "ebpf"})
	l.Internal("panic serving POST /v1/verify: boom", []byte("goroutine 7 [running]:\nmain.main()\n"))
	l.Service(Service{Stopping: true, Mechanism: events.EBPF, Reason: "SIGTERM"})
	flush(t, l)
	lines := out.lines(t)
	dropped := l.encodeDropped(nil, Drops{ProcessEvents: 40, Audit: 1, Sink: 1}, []uidDrops{{1000, 38}, {noUID, 2}})
	return append(lines, decodeLines(t, dropped)...), pe
}

// procEvents are the events of real processes started by a test.
type procEvents struct {
	all           []events.Event
	childPid      int32
	child, parent token.Token
	exitCode      int    // of the process that exited normally
	killedBy      string // the signal that killed the child
	argv          []string
	exe           string
	// The child started between these two times.
	startedAfter, startedBefore time.Time
}

// TestRefusedRequestArgsCut: a refused launch's line carries at most
// RefusedArgsBytes of its arguments, cut at a character boundary, with the
// whole count and the cut marked; a launch carried out logs them whole.
// Before, each refused launch wrote its caller's 32 KiB of arguments (127
// KB escaped), and one user's refusals at the request rate rotated every
// other user's audit lines out of the file within a minute.
func TestRefusedRequestArgsCut(t *testing.T) {
	long := []string{"/bin/true", strings.Repeat("é", 400), strings.Repeat("x", 4000), "last"}
	tests := []struct {
		name    string
		schema  string
		err     error
		args    string // the path of the arguments
		cutPath string // the path of the mark
		whole   bool
	}{
		{"refused, ECS", SchemaECS, errors.New("refused"), "process.args", "supervisor.args_truncated", false},
		{"carried out, ECS", SchemaECS, nil, "process.args", "supervisor.args_truncated", true},
		{"refused, OCSF", SchemaOCSF, errors.New("refused"), "process.cmd_line", "unmapped.args_truncated", false},
		{"carried out, OCSF", SchemaOCSF, nil, "process.cmd_line", "unmapped.args_truncated", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, out := newTestLogger(t, Config{Schema: tt.schema})
			l.Request(Request{Action: ActionLaunchRequested, UID: 1001, GID: 1001, Pid: 4000, Argv: long, Err: tt.err})
			flush(t, l)
			lines := out.lines(t)
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1", len(lines))
			}
			args, _ := get(lines[0], tt.args)
			var n int
			switch a := args.(type) {
			case []any:
				for _, s := range a {
					n += len(s.(string))
					if !utf8.ValidString(s.(string)) {
						t.Errorf("argument %q cut inside a character", s)
					}
				}
			case string:
				n = len(strings.ReplaceAll(a, " ", ""))
			}
			cut, _ := get(lines[0], tt.cutPath)
			total := len(strings.Join(long, ""))
			if tt.whole && (n != total || cut != nil) {
				t.Errorf("carried out: %d argument bytes, cut mark %v; want all %d, no mark", n, cut, total)
			}
			if !tt.whole && (n > RefusedArgsBytes || n < RefusedArgsBytes-1 || cut != true) {
				t.Errorf("refused: %d argument bytes, cut mark %v; want %d at most (a character less at worst), marked", n, cut, RefusedArgsBytes)
			}
			if count, ok := getInt(lines[0], map[string]string{SchemaECS: "process.args_count", SchemaOCSF: "unmapped.args_count"}[tt.schema]); !tt.whole && (!ok || count != int64(len(long))) {
				t.Errorf("args_count = %d (%v), want %d", count, ok, len(long))
			}
		})
	}
}

// TestTeardownIncomplete: a teardown whose members may not be the whole
// tree says so in its line, under either schema; one without a hole has
// no such field.
func TestTeardownIncomplete(t *testing.T) {
	const why = "pid 42 was born before the lineage watched it"
	for _, tt := range []struct{ schema, path string }{
		{SchemaECS, "supervisor.incomplete"},
		{SchemaOCSF, "unmapped.incomplete"},
	} {
		t.Run(tt.schema, func(t *testing.T) {
			l, out := newTestLogger(t, Config{Schema: tt.schema})
			v := verdict.Verdict{Pid: 42, Result: verdict.Owned, Mechanism: "ebpf"}
			l.Teardown(actions.Outcome{Verdict: v, Acted: true, Dead: true, Incomplete: why})
			l.Teardown(actions.Outcome{Verdict: v, Acted: true, Dead: true})
			flush(t, l)
			lines := out.lines(t)
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2", len(lines))
			}
			if got, _ := get(lines[0], tt.path); got != why {
				t.Errorf("%s = %v, want %q", tt.path, got, why)
			}
			if got, ok := get(lines[1], tt.path); ok {
				t.Errorf("a whole tree's line has %s = %v", tt.path, got)
			}
		})
	}
}
