package logfeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestProcessLineValues checks what the process lines say about real
// processes, not only their shape.
func TestProcessLineValues(t *testing.T) {
	lines, pe := produceAll(t, SchemaECS)
	byAction := map[string][]map[string]any{}
	for _, l := range lines {
		a := getString(l, "event.action")
		byAction[a] = append(byAction[a], l)
	}
	exec := byAction[ActionProcessExec][0]
	if got, want := getString(exec, "process.entity_id"), pe.child.String(); got != want {
		t.Errorf("process.entity_id = %q, want %q (the token)", got, want)
	}
	if got, want := getString(exec, "process.parent.entity_id"), pe.parent.String(); got != want {
		t.Errorf("process.parent.entity_id = %q, want %q", got, want)
	}
	if pid, _ := getInt(exec, "process.pid"); pid != int64(pe.childPid) {
		t.Errorf("process.pid = %d, want %d", pid, pe.childPid)
	}
	if ppid, _ := getInt(exec, "process.parent.pid"); ppid != int64(os.Getpid()) {
		t.Errorf("process.parent.pid = %d, want %d", ppid, os.Getpid())
	}
	if got := getString(exec, "process.executable"); got != pe.exe {
		t.Errorf("process.executable = %q, want %q", got, pe.exe)
	}
	args, _ := get(exec, "process.args")
	if b, _ := json.Marshal(args); string(b) != mustJSON(pe.argv) {
		t.Errorf("process.args = %s, want %s", b, mustJSON(pe.argv))
	}
	start, err := time.Parse(time.RFC3339Nano, getString(exec, "process.start"))
	if err != nil {
		t.Fatalf("process.start: %v", err)
	}
	// Ticks are 10 ms wide and truncated; allow one tick and some slack
	// for the sampled boot-time offset.
	const slack = 20 * time.Millisecond
	if start.Before(pe.startedAfter.Add(-slack)) || start.After(pe.startedBefore.Add(slack)) {
		t.Errorf("process.start = %v, want between %v and %v", start, pe.startedAfter, pe.startedBefore)
	}
	ends := byAction[ActionProcessEnded]
	if len(ends) != 2 {
		t.Fatalf("%d process_ended lines, want 2", len(ends))
	}
	if got := getString(ends[0], "supervisor.exit_signal"); got != pe.killedBy {
		t.Errorf("supervisor.exit_signal = %q, want %q", got, pe.killedBy)
	}
	if _, ok := get(ends[0], "process.exit_code"); ok {
		t.Errorf("process.exit_code set for a process killed by a signal")
	}
	if code, ok := getInt(ends[1], "process.exit_code"); !ok || code != int64(pe.exitCode) {
		t.Errorf("process.exit_code = %d (%v), want %d", code, ok, pe.exitCode)
	}
	if v, _ := get(ends[1], "supervisor.inferred"); v != true {
		t.Errorf("supervisor.inferred = %v, want true", v)
	}
	lost := byAction[ActionEventsLost][0]
	if n, _ := getInt(lost, "supervisor.lost_events"); n != 17 {
		t.Errorf("supervisor.lost_events = %d, want 17", n)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestProcessEventsDisabled(t *testing.T) {
	l, out := newTestLogger(t, Config{})
	ev := events.Event{Kind: events.Exec, Pid: 1}
	l.Event(&ev)
	l.Event(&events.Event{Kind: events.Lost, Mechanism: events.EBPF, Count: 3})
	flush(t, l)
	lines := out.lines(t)
	if len(lines) != 1 || getString(lines[0], "event.action") != ActionEventsLost {
		t.Errorf("with ProcessEvents off got %d lines %v, want only the loss", len(lines), lines)
	}
}

func TestArgsCut(t *testing.T) {
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		l, out := newTestLogger(t, Config{Schema: schema, ProcessEvents: AllKinds})
		long := strings.Repeat("a", DefaultArgsBytes/2)
		ev := events.Event{Kind: events.Exec, Pid: 7, Argv: []string{long, long, long, "tail"}}
		l.Event(&ev)
		flush(t, l)
		line := out.lines(t)[0]
		if schema == SchemaECS {
			n, _ := getInt(line, "process.args_count")
			args, _ := get(line, "process.args")
			total := 0
			for _, a := range args.([]any) {
				total += len(a.(string))
			}
			if n != 4 || total != DefaultArgsBytes {
				t.Errorf("ecs: args_count %d, %d bytes of args; want 4 and %d", n, total, DefaultArgsBytes)
			}
		} else if got := len(getString(line, "process.cmd_line")); got != DefaultArgsBytes {
			t.Errorf("ocsf: cmd_line of %d bytes, want %d", got, DefaultArgsBytes)
		}
	}
}

// TestOCSF checks every line against the parts of OCSF 1.3.0 Process
// Activity (class 1007) that this feed fills: the required attributes, the
// enumerations' ids and their names, and type_uid = class_uid*100+activity_id.
func TestOCSF(t *testing.T) {
	lines, pe := produceAll(t, SchemaOCSF)
	activities := map[int64]string{1: "Launch", 2: "Terminate", 99: ""}
	seen := map[string]bool{}
	for _, line := range lines {
		action := getString(line, "unmapped.action")
		seen[action] = true
		ints := map[string]int64{}
		for _, f := range []string{"class_uid", "category_uid", "activity_id", "type_uid", "severity_id", "time", "process.pid", "actor.process.pid"} {
			v, ok := getInt(line, f)
			if !ok {
				t.Errorf("%s: %s missing or not an integer", action, f)
			}
			ints[f] = v
		}
		if ints["class_uid"] != 1007 || ints["category_uid"] != 1 {
			t.Errorf("%s: class %d category %d, want 1007 and 1", action, ints["class_uid"], ints["category_uid"])
		}
		name, ok := activities[ints["activity_id"]]
		if !ok {
			t.Errorf("%s: activity_id %d is not used by this feed", action, ints["activity_id"])
		}
		if name == "" {
			name = action
		}
		if got := getString(line, "activity_name"); got != name {
			t.Errorf("%s: activity_name %q, want %q", action, got, name)
		}
		if ints["type_uid"] != 1007*100+ints["activity_id"] {
			t.Errorf("%s: type_uid %d, want %d", action, ints["type_uid"], 1007*100+ints["activity_id"])
		}
		if ints["severity_id"] < 1 || ints["severity_id"] > 6 {
			t.Errorf("%s: severity_id %d", action, ints["severity_id"])
		}
		if d := time.Since(time.UnixMilli(ints["time"])); d < -time.Hour || d > time.Hour {
			t.Errorf("%s: time %d is not milliseconds since the epoch", action, ints["time"])
		}
		for _, f := range []string{"class_name", "category_name", "type_name", "severity", "metadata.version", "metadata.product.name", "device.hostname"} {
			if getString(line, f) == "" {
				t.Errorf("%s: %s missing", action, f)
			}
		}
		if s, ok := getInt(line, "status_id"); ok && !slices.Contains([]int64{0, 1, 2}, s) {
			t.Errorf("%s: status_id %d", action, s)
		}
		if getString(line, "metadata.version") != OCSFVersion {
			t.Errorf("%s: metadata.version %q", action, getString(line, "metadata.version"))
		}
		if action == ActionProcessExec {
			if got := getString(line, "process.uid"); got != pe.child.String() {
				t.Errorf("exec: process.uid %q, want the token %q", got, pe.child.String())
			}
			if got := getString(line, "process.parent_process.uid"); got != pe.parent.String() {
				t.Errorf("exec: parent_process.uid %q, want %q", got, pe.parent.String())
			}
			if got := getString(line, "actor.process.uid"); got != pe.parent.String() {
				t.Errorf("exec: actor.process.uid %q, want the parent %q", got, pe.parent.String())
			}
		}
	}
	for _, a := range allActions {
		if !seen[a] {
			t.Errorf("no OCSF %s line", a)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Schema: "cef"},
		{Output: "kafka://x"},
		{BufferLines: -1},
		{ArgsBytes: -1},
		{ArgsBytes: MaxArgsBytes + 1},
		{Output: "file:/nonexistent-dir/x/y.log"},
	} {
		l, err := New(cfg)
		if err == nil {
			l.Close(context.Background())
			t.Errorf("New(%+v) succeeded, want an error", cfg)
			continue
		}
		if cfg.Output != "file:/nonexistent-dir/x/y.log" && !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}

// blockingWriter blocks every Write until released, then fails the first
// failN writes.
type blockingWriter struct {
	release chan struct{}
	entered chan struct{} // receives once, when the first Write blocks
	once    sync.Once
	mu      sync.Mutex
	failN   int
	lines   lineBuf
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{release: make(chan struct{}), entered: make(chan struct{})}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	w.mu.Lock()
	fail := w.failN > 0
	if fail {
		w.failN--
	}
	w.mu.Unlock()
	if fail {
		return 0, errors.New("disk on fire")
	}
	return w.lines.Write(p)
}

// TestBlockedSink: a sink that blocks never stalls the callers; what could
// not be buffered is counted, and reported in a line of its own once the
// sink works again.
func TestBlockedSink(t *testing.T) {
	w := newBlockingWriter()
	const buffer, logged = 8, 200
	l, _ := newTestLogger(t, Config{Writer: w, BufferLines: buffer, ProcessEvents: AllKinds})
	ev := events.Event{Kind: events.Fork, Pid: 1, Mechanism: events.EBPF}
	l.Event(&ev)
	<-w.entered // the drain goroutine is now stuck in Write
	for i := range logged {
		ev.Pid = int32(i + 2)
		l.Event(&ev) // returns although nothing is written
	}
	st := l.Stats()
	if st.Dropped < logged-buffer {
		t.Fatalf("Dropped = %d after %d lines into a buffer of %d behind a blocked sink, want >= %d", st.Dropped, logged, buffer, logged-buffer)
	}
	close(w.release)
	flush(t, l)
	st = l.Stats()
	lines := w.lines.lines(t)
	var reported uint64
	var process int
	for _, line := range lines {
		switch getString(line, "event.action") {
		case ActionLogLinesDropped:
			n, _ := getInt(line, "supervisor.dropped_lines")
			reported += uint64(n)
		case ActionProcessStarted:
			process++
		}
	}
	if reported != st.Dropped {
		t.Errorf("log_lines_dropped lines report %d, Stats.Dropped = %d", reported, st.Dropped)
	}
	if uint64(process) != st.Written || uint64(process)+st.Dropped != logged+1 {
		t.Errorf("%d process lines written, %d dropped, Stats %+v; want written+dropped = %d", process, st.Dropped, st, logged+1)
	}
	if st.DropReports == 0 {
		t.Errorf("Stats.DropReports = 0")
	}
}

// TestFailingSink: lines a sink fails to take are counted as dropped, and
// the count is reported once a write succeeds; OnSinkState hears of the
// failure and of the recovery, once each (the daemon says both on its
// stderr: the feed cannot tell its own reader it is dropping lines).
func TestFailingSink(t *testing.T) {
	w := newBlockingWriter()
	close(w.release)
	w.failN = 2
	var states []string
	var mu sync.Mutex
	onSink := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, fmt.Sprint(err))
	}
	l, _ := newTestLogger(t, Config{Writer: w, BufferLines: 16, OnSinkState: onSink})
	l.Verdict(verdict.Verdict{Pid: 0, Result: verdict.Gone})
	flush(t, l) // the first failure
	mu.Lock()
	if len(states) != 1 || states[0] == "<nil>" {
		t.Errorf("after a failed write OnSinkState heard %q, want the error once", states)
	}
	mu.Unlock()
	l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
	flush(t, l) // the batch holding the verdict fails
	st := l.Stats()
	if st.Dropped != 2 || st.LastSinkError == "" {
		t.Fatalf("after failed writes: %+v, want 2 dropped and the error", st)
	}
	l.Verdict(verdict.Verdict{Pid: 2, Result: verdict.Gone})
	flush(t, l)
	var actions []string
	for _, line := range w.lines.lines(t) {
		actions = append(actions, getString(line, "event.action"))
		if getString(line, "event.action") == ActionLogLinesDropped {
			if n, _ := getInt(line, "supervisor.dropped_lines"); n != 2 {
				t.Errorf("dropped_lines = %d, want 2", n)
			}
		}
	}
	if want := []string{ActionVerdict, ActionLogLinesDropped}; !slices.Equal(actions, want) {
		t.Errorf("lines %v, want %v", actions, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 2 || states[0] == "<nil>" || states[1] != "<nil>" {
		t.Errorf("OnSinkState heard %q, want the error, then nil once it wrote again", states)
	}
}

// TestCloseBlockedSink: Close gives up when its context ends, and the
// drain goroutine ends once the sink returns.
func TestCloseBlockedSink(t *testing.T) {
	w := newBlockingWriter()
	l, err := New(Config{Writer: w, BufferLines: 4})
	if err != nil {
		t.Fatal(err)
	}
	l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
	<-w.entered
	l.Verdict(verdict.Verdict{Pid: 2, Result: verdict.Gone}) // buffered behind the blocked write
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want context.Canceled", err)
	}
	if err := l.Close(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	l.Verdict(verdict.Verdict{Pid: 3, Result: verdict.Gone}) // after Close: dropped, no panic
	close(w.release)
	<-l.done
	if st := l.Stats(); st.Dropped != 2 || st.Written != 1 {
		t.Errorf("Stats after an abandoned Close: %+v, want 1 written, 2 dropped", st)
	}
}

func TestConcurrentLogging(t *testing.T) {
	l, out := newTestLogger(t, Config{ProcessEvents: AllKinds, BufferLines: 1 << 14})
	var wg sync.WaitGroup
	const workers, each = 4, 500
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := events.Event{Kind: events.Exit, Mechanism: events.Netlink, Status: 1 << 8}
			for i := range each {
				ev.Pid = int32(g*each + i + 1)
				l.Event(&ev)
			}
		}()
	}
	wg.Wait()
	flush(t, l)
	st := l.Stats()
	lines := out.lines(t)
	pids := map[int64]bool{}
	for _, line := range lines {
		if getString(line, "event.action") == ActionProcessEnded {
			p, _ := getInt(line, "process.pid")
			pids[p] = true
		}
	}
	if uint64(len(pids))+st.Dropped != workers*each {
		t.Errorf("%d distinct pids logged + %d dropped, want %d", len(pids), st.Dropped, workers*each)
	}
}

// TestConcurrentMixedLines: process lines, written straight onto the
// batch, and verdicts, copied into it, from several goroutines at once,
// with a buffer large enough to keep them all and one small enough that
// verdicts evict process lines: every line comes out whole, and every line
// is written or counted as dropped (no verdict from the large buffer).
func TestConcurrentMixedLines(t *testing.T) {
	for _, buffer := range []int{1 << 14, 64} {
		t.Run(fmt.Sprint(buffer), func(t *testing.T) {
			l, out := newTestLogger(t, Config{ProcessEvents: AllKinds, BufferLines: buffer})
			const workers, each = 4, 400
			var wg sync.WaitGroup
			for g := range workers {
				wg.Add(2)
				go func() {
					defer wg.Done()
					ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Argv: []string{"run", strings.Repeat("a\"", 300)}}
					for i := range each {
						ev.Pid = int32(g*each + i + 1)
						l.Event(&ev)
					}
				}()
				go func() {
					defer wg.Done()
					for i := range each / 8 {
						l.Verdict(verdict.Verdict{Pid: int32(g*each + i + 1), Result: verdict.Gone, Reason: "exit observed"})
					}
				}()
			}
			wg.Wait()
			flush(t, l)
			st := l.Stats()
			pids := map[int64]bool{}
			verdicts := 0
			for _, line := range out.lines(t) {
				switch getString(line, "event.action") {
				case ActionProcessExec:
					p, _ := getInt(line, "process.pid")
					pids[p] = true
					if got := getString(line, "process.command_line"); got != "run "+strings.Repeat("a\"", 300) {
						t.Fatalf("pid %d: command line %q", p, got)
					}
				case ActionVerdict:
					verdicts++
				}
			}
			if uint64(len(pids))+st.DroppedBy.ProcessEvents != workers*each {
				t.Errorf("%d distinct pids logged + %d dropped, want %d", len(pids), st.DroppedBy.ProcessEvents, workers*each)
			}
			if uint64(verdicts)+st.DroppedBy.Verdicts != workers*each/8 || buffer > workers*each && st.DroppedBy.Verdicts != 0 {
				t.Errorf("%d verdicts written, %d dropped; want %d in all, none dropped from a buffer of %d", verdicts, st.DroppedBy.Verdicts, workers*each/8, buffer)
			}
		})
	}
}

func ExampleLogger() {
	l, err := New(Config{Output: "stdout", ProcessEvents: AllKinds})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close(context.Background())
	tok, _ := token.Parse("v1:t:0123456789abcdef0123456789abcdef:1234:-")
	l.Verdict(verdict.Verdict{Pid: 4242, Token: tok, Result: verdict.Gone, Reason: "exit observed", Mechanism: "netlink"})
}

// TestInternal: an internal error is one line with the message and the
// stack (cut to MaxStackBytes) in ECS's error fields, or OCSF's
// status_detail and unmapped.stack_trace.
func TestInternal(t *testing.T) {
	stack := []byte("goroutine 1 [running]:\n" + strings.Repeat("x", MaxStackBytes))
	for _, tt := range []struct{ schema, msgField, stackField string }{
		{SchemaECS, "error.message", "error.stack_trace"},
		{SchemaOCSF, "status_detail", "unmapped.stack_trace"},
	} {
		l, out := newTestLogger(t, Config{Schema: tt.schema})
		l.Internal("panic serving GET /v1/status: boom", stack)
		flush(t, l)
		lines := out.lines(t)
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines, want 1", tt.schema, len(lines))
		}
		if got := getString(lines[0], tt.msgField); got != "panic serving GET /v1/status: boom" {
			t.Errorf("%s: %s = %q", tt.schema, tt.msgField, got)
		}
		if got := getString(lines[0], tt.stackField); got != string(stack[:MaxStackBytes]) {
			t.Errorf("%s: %s has %d bytes starting %.30q, want the stack cut to %d", tt.schema, tt.stackField, len(got), got, MaxStackBytes)
		}
	}
}

// TestClaimOnLines: verdict, signal and teardown lines for a claim name it
// (ECS supervisor.claim.id, OCSF unmapped.claim_id).
func TestClaimOnLines(t *testing.T) {
	for schema, field := range map[string]string{SchemaECS: "supervisor.claim.id", SchemaOCSF: "unmapped.claim_id"} {
		lines, _ := produceAll(t, schema)
		seen := map[string]bool{}
		for _, line := range lines {
			if getString(line, field) == "g-abcdefghijkl" {
				action := getString(line, "event.action")
				if schema == SchemaOCSF {
					action = getString(line, "unmapped.action")
				}
				seen[action] = true
			}
		}
		for _, a := range []string{ActionVerdict, ActionSignalSent, ActionTeardown} {
			if !seen[a] {
				t.Errorf("%s: no %s line names its claim in %s", schema, a, field)
			}
		}
	}
}

// TestArgsCutMarked: arguments the kernel gave whole but the line cuts at
// its bound (Config.ArgsBytes) are marked as cut, with their real size,
// for the process and for its parent; a vector that just fits is not.
// (One argument of 20 KiB, under the eBPF bound and so not ArgsTruncated,
// once had 8 KiB in the line with args_count 1 and no mark.) The bound is
// the configured one: the default, and a smaller one.
func TestArgsCutMarked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int // Config.ArgsBytes
		limit int // what the line keeps
	}{
		{"default", 0, DefaultArgsBytes},
		{"configured", 8 << 10, 8 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) { testArgsCutMarked(t, tc.bytes, tc.limit) })
	}
}

func testArgsCutMarked(t *testing.T, bytes, limit int) {
	long := strings.Repeat("y", limit+100)
	fits := []string{strings.Repeat("a", limit-2), "b"} // joined: limit
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		cut := events.Event{Kind: events.Exec, Pid: 7, PPid: 6, Argv: []string{"true", long},
			Exec:   events.ExecInfo{ArgsCount: 2, ArgsSize: len(long) + 6},
			Parent: &events.Desc{Argv: []string{"sh", "-c", long}}}
		whole := events.Event{Kind: events.Exec, Pid: 8, PPid: 6, Argv: fits,
			Exec:   events.ExecInfo{ArgsCount: 2, ArgsSize: limit + 1},
			Parent: &events.Desc{Argv: fits}}
		lines, ns := linesOfConfig(t, Config{Schema: schema, ProcessEvents: AllKinds, ArgsBytes: bytes}, &cut, &whole)
		for _, tt := range []struct {
			line   map[string]any
			prefix string
			size   int64
		}{
			{lines[0], ns, int64(len(long) + 6)},
			{lines[0], ns + "parent.", int64(len("sh -c ") + len(long) + 1)},
		} {
			if v, _ := get(tt.line, tt.prefix+"args_truncated"); v != true {
				t.Errorf("%s: %sargs_truncated = %v, want true", schema, tt.prefix, v)
			}
			if n, _ := getInt(tt.line, tt.prefix+"args_size"); n != tt.size {
				t.Errorf("%s: %sargs_size = %d, want %d", schema, tt.prefix, n, tt.size)
			}
		}
		// The cut line holds limit bytes of arguments, no more, no less.
		if schema == SchemaOCSF {
			if n := len(getString(lines[0], "process.cmd_line")); n != limit {
				t.Errorf("ocsf: cmd_line of %d bytes, want %d", n, limit)
			}
		} else {
			v, _ := get(lines[0], "process.args")
			n := 0
			for _, a := range v.([]any) {
				n += len(a.(string))
			}
			if c := len(getString(lines[0], "process.command_line")); n != limit || c != limit {
				t.Errorf("ecs: %d bytes of args, command_line of %d, want %d", n, c, limit)
			}
		}
		for _, k := range []string{ns + "args_truncated", ns + "parent"} {
			if v, ok := get(lines[1], k); ok {
				t.Errorf("%s: arguments that fit have %s = %v", schema, k, v)
			}
		}
	}
}

// linesOf logs evs with every process event on and returns their lines,
// and the namespace of the supervisor's own fields in schema.
func linesOf(t *testing.T, schema string, evs ...*events.Event) (lines []map[string]any, ns string) {
	t.Helper()
	return linesOfConfig(t, Config{Schema: schema, ProcessEvents: AllKinds}, evs...)
}

// linesOfConfig is linesOf with a Logger of cfg.
func linesOfConfig(t *testing.T, cfg Config, evs ...*events.Event) (lines []map[string]any, ns string) {
	t.Helper()
	schema := cfg.Schema
	l, out := newTestLogger(t, cfg)
	for _, ev := range evs {
		l.Event(ev)
	}
	flush(t, l)
	if lines = out.lines(t); len(lines) != len(evs) {
		t.Fatalf("%s: %d lines, want %d", schema, len(lines), len(evs))
	}
	if schema == SchemaOCSF {
		return lines, "unmapped."
	}
	return lines, "supervisor."
}

// TestArgsCutKeepsMarks: a cut that falls inside a redaction mark ends
// before the mark, in every form the arguments take (ECS args and
// command_line, OCSF cmd_line, the process's and its parent's), so no
// line shows "--password=[RED", which reads as a password the process was
// given.
func TestArgsCutKeepsMarks(t *testing.T) {
	const limit = 8 << 10
	secret := "--password=" + redact.Marker
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		// args: limit-15 bytes, then 15 of the mark's argument;
		// command_line: the space takes one more.
		argv := []string{strings.Repeat("a", limit-15), secret}
		ev := events.Event{Kind: events.Exec, Pid: 7, PPid: 6, Argv: argv,
			Exec:   events.ExecInfo{ArgsCount: 2, ArgsSize: limit + 6, ArgsRedacted: true},
			Parent: &events.Desc{Argv: argv, Exec: events.ExecInfo{ArgsRedacted: true}}}
		lines, _ := linesOfConfig(t, Config{Schema: schema, ProcessEvents: AllKinds, ArgsBytes: limit}, &ev)
		var texts []string
		for _, p := range []string{"process.", "process.parent."} {
			if schema == SchemaOCSF {
				p = strings.Replace(p, "parent.", "parent_process.", 1)
				texts = append(texts, getString(lines[0], p+"cmd_line"))
				continue
			}
			texts = append(texts, getString(lines[0], p+"command_line"))
			args, _ := get(lines[0], p+"args")
			for _, a := range args.([]any) {
				texts = append(texts, a.(string))
			}
		}
		for _, s := range texts {
			if !strings.HasSuffix(s, "a") && !strings.HasSuffix(s, "--password=") {
				t.Errorf("%s: a cut text ends %q, want the mark left out whole", schema, s[max(0, len(s)-20):])
			}
		}
	}
}

func TestCutArgsKeepsMarks(t *testing.T) {
	argv := []string{"mysql", "-p", redact.Marker}
	got, cut := cutArgs(argv, len("mysql")+len("-p")+4)
	if !cut || len(got) != 3 || got[2] != "" {
		t.Errorf("cutArgs = %q, %v; want the mark left out whole", got, cut)
	}
}
