package view

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

const esc = "\x1b[41mred\u009b2J"

func uidp(u uint32) *uint32 { return &u }
func intp(i int) *int       { return &i }

// TestEventTextNoEscapes: a comm, an executable, argv, a claim's owner and
// reason chosen by a workload reach the terminal escaped, in every kind of
// line, local or from the daemon.
func TestEventTextNoEscapes(t *testing.T) {
	recs := []api.StreamRecord{
		{Kind: "fork", Pid: 2, PPid: 1, Comm: esc, UID: uidp(1000), Claim: "g-" + esc},
		{Kind: "exec", Pid: 2, PPid: 1, Comm: "sh", Exe: "/bin/" + esc},
		{Kind: "exec", Pid: 2, PPid: 1, Comm: "sh", Argv: []string{"sh", "-c", "echo " + esc}},
		{Kind: "exit", Pid: 2, PPid: 1, Comm: esc, ExitCode: intp(3)},
		{Kind: "claim", Claim: "g-1", Action: "claim_state_changed", From: "running", State: "released", Owner: esc, Reason: esc, UID: uidp(0)},
		{Kind: "lost", Mechanism: esc, Count: 3},
	}
	var b []byte
	for i := range recs {
		b = AppendEvent(b, &recs[i], true, time.Time{})
	}
	out := string(b)
	if strings.ContainsAny(out, "\x1b\u009b") {
		t.Errorf("the events view wrote a terminal escape:\n%q", out)
	}
	if n := strings.Count(out, "?[41mred?2J"); n < len(recs)+1 {
		t.Errorf("the sanitized strings appear %d times, want %d:\n%s", n, len(recs)+1, out)
	}
	if got := strings.Count(out, "\n"); got != len(recs) {
		t.Errorf("%d lines for %d records:\n%s", got, len(recs), out)
	}

	// The same through the printer, from a local event and a stream line.
	var w bytes.Buffer
	p, err := NewEventPrinter(&w, EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 5, PPid: 1, Exe: esc, Argv: []string{esc, "a b"}}
	copy(ev.Comm[:], "\x1b[41m")
	p.Event(&ev)
	line, _ := json.Marshal(api.StreamRecord{Kind: "exit", Pid: 5, Comm: esc, ExitCode: intp(0)})
	if err := p.Line(line); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if strings.ContainsAny(w.String(), "\x1b\u009b") || !strings.Contains(w.String(), `?[41mred?2J "a b"`) {
		t.Errorf("printer output:\n%q", w.String())
	}
}

// TestEventText pins the columns of each kind of line.
func TestEventText(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.Local)
	ts := at.Format(time.RFC3339Nano)
	for _, tc := range []struct {
		r       api.StreamRecord
		tokens  bool
		started time.Time
		want    string
	}{
		{api.StreamRecord{Kind: "fork", Time: ts, Pid: 10, PPid: 1, Comm: "bash", UID: uidp(1000)}, false, time.Time{},
			"03:04:05.678  fork   10       1        1000    bash\n"},
		{api.StreamRecord{Kind: "exec", Time: ts, Pid: 10, PPid: 1, Comm: "ls", Exe: "/bin/ls", Argv: []string{"ls", "-l", ""}, Claim: "g-1"}, false, time.Time{},
			"03:04:05.678  exec   10       1        -       ls -l \"\"  [g-1]\n"},
		{api.StreamRecord{Kind: "exec", Time: ts, Pid: 10, PPid: 1, Comm: "ls", Exe: "/bin/ls"}, false, time.Time{},
			"03:04:05.678  exec   10       1        -       /bin/ls\n"},
		{api.StreamRecord{Kind: "exit", Time: ts, Pid: 10, PPid: 1, Comm: "ls", ExitCode: intp(2)}, false, at.Add(-1500 * time.Millisecond),
			"03:04:05.678  exit   10       1        -       ls  exit 2 after 1.5s\n"},
		{api.StreamRecord{Kind: "exit", Time: ts, Pid: 10, PPid: 1, Comm: "ls", Signal: 9, Inferred: true}, false, time.Time{},
			"03:04:05.678  exit   10       1        -       ls  signal 9 (inferred)\n"},
		{api.StreamRecord{Kind: "fork", Time: ts, Pid: 10, PPid: 1, Comm: "sh", Token: "v1:t:x:1:2"}, true, time.Time{},
			"03:04:05.678  fork   10       1        -       v1:t:x:1:2" + strings.Repeat(" ", 45) + " sh\n"},
		{api.StreamRecord{Kind: "lost", Time: ts, Mechanism: "stream", Count: 7}, false, time.Time{},
			"03:04:05.678  lost   lost 7 events (stream: this reader fell behind)\n"},
		{api.StreamRecord{Kind: "claim", Time: ts, Claim: "j-1", Action: "job_exited", ExitCode: intp(3), UID: uidp(5), Owner: "ci"}, false, time.Time{},
			"03:04:05.678  claim  j-1 job exited exit 3 uid 5 owner ci\n"},
	} {
		if got := string(AppendEvent(nil, &tc.r, tc.tokens, tc.started)); got != tc.want {
			t.Errorf("AppendEvent(%+v) =\n%q, want\n%q", tc.r, got, tc.want)
		}
	}
}

// TestEventFilter: each filter alone and together, on one stream of
// records; --tree follows forks from the given pid and stops at exits.
func TestEventFilter(t *testing.T) {
	stream := []api.StreamRecord{
		{Kind: "fork", Pid: 10, PPid: 1, Comm: "bash"},                        // 0
		{Kind: "fork", Pid: 11, PPid: 10, Comm: "bash"},                       // 1
		{Kind: "exec", Pid: 11, PPid: 10, Comm: "make", Claim: "g-1"},         // 2
		{Kind: "fork", Pid: 12, PPid: 11, Comm: "make", Claim: "g-1"},         // 3
		{Kind: "fork", Pid: 20, PPid: 1, Comm: "cron"},                        // 4
		{Kind: "lost", Mechanism: "stream", Count: 2},                         // 5
		{Kind: "exit", Pid: 12, PPid: 11, Comm: "make", Claim: "g-1"},         // 6
		{Kind: "claim", Claim: "g-1", Pid: 11, Action: "claim_state_changed"}, // 7
		{Kind: "fork", Pid: 12, PPid: 20, Comm: "cron"},                       // 8: pid 12 again, not in the tree
		{Kind: "exit", Pid: 11, PPid: 10, Comm: "make", Claim: "g-1"},         // 9
	}
	for _, tc := range []struct {
		name string
		o    EventOptions
		want []int
	}{
		{"none", EventOptions{}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"pid", EventOptions{Pid: 11}, []int{1, 2, 5, 7, 9}},
		{"tree", EventOptions{Tree: 11}, []int{1, 2, 3, 5, 6, 7, 9}},
		{"tree from the top", EventOptions{Tree: 10}, []int{0, 1, 2, 3, 5, 6, 7, 9}},
		{"claim", EventOptions{Claim: "g-1"}, []int{2, 3, 5, 6, 7, 9}},
		{"kind, and losses whatever the kinds", EventOptions{Kinds: "fork"}, []int{0, 1, 3, 4, 5, 8}},
		{"kinds", EventOptions{Kinds: "exit, lost"}, []int{5, 6, 9}},
		{"comm", EventOptions{Comm: "cron"}, []int{4, 5, 8}},
		{"comm cut to 15 bytes", EventOptions{Comm: "make-and-more-than-15"}, []int{5}},
		{"tree and kind", EventOptions{Tree: 11, Kinds: "fork,exit"}, []int{1, 3, 5, 6, 9}},
		{"claim and comm", EventOptions{Claim: "g-1", Comm: "make", Kinds: "exec,fork,exit,claim"}, []int{2, 3, 5, 6, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.o.Filter()
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for i := range stream {
				if f.Match(&stream[i]) {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Filter(%+v) shows %v, want %v", tc.o, got, tc.want)
			}
		})
	}
}

// TestEventOptions: bad filters are refused with the flag's name, and the
// flags parse into the options.
func TestEventOptions(t *testing.T) {
	for _, tc := range []struct {
		o    EventOptions
		flag string
	}{{EventOptions{Kinds: "fork,spawn"}, "--kind"}, {EventOptions{Pid: -1}, "--pid"}, {EventOptions{Tree: 1 << 30}, "--tree"}, {EventOptions{Kinds: ","}, "--kind"}} {
		if _, err := tc.o.Filter(); err == nil || !strings.HasPrefix(err.Error(), tc.flag+" ") {
			t.Errorf("Filter(%+v) = %v, want an error naming %s", tc.o, err, tc.flag)
		}
	}
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	o := EventFlags(fs)
	if err := fs.Parse([]string{"--json", "--tokens", "--pid", "3", "--tree", "4", "--claim", "g-1", "--kind", "exit", "--comm", "sh"}); err != nil {
		t.Fatal(err)
	}
	want := EventOptions{JSON: true, Tokens: true, Pid: 3, Tree: 4, Claim: "g-1", Kinds: "exit", Comm: "sh"}
	if *o != want {
		t.Errorf("flags = %+v, want %+v", *o, want)
	}
	f, _ := want.Filter()
	if f.Local() == nil {
		t.Error("--claim accepted for a local mechanism")
	}
}

// TestEventStreamKinds: the daemon is asked for the kinds shown, plus the
// forks and exits --tree needs to follow its tree; nothing for all kinds.
func TestEventStreamKinds(t *testing.T) {
	tests := []struct {
		o    EventOptions
		want string
	}{
		{EventOptions{}, ""},
		{EventOptions{Pid: 5}, ""},
		{EventOptions{Kinds: "exit"}, "lost,exit"},
		{EventOptions{Kinds: "lost"}, "lost"},
		{EventOptions{Kinds: "claim,exec"}, "lost,exec,claim"},
		{EventOptions{Kinds: "exec", Tree: 9}, "lost,fork,exec,exit"},
	}
	for _, tt := range tests {
		f, err := tt.o.Filter()
		if err != nil {
			t.Fatal(err)
		}
		if got := f.StreamKinds().String(); got != tt.want {
			t.Errorf("%+v: the daemon is asked for %q, want %q", tt.o, got, tt.want)
		}
	}
}

// TestEventPrinter: JSON passes daemon lines through as they came and
// encodes local events as events.AppendJSON does; a malformed line is an
// error; Abort prints nothing, not even the header.
func TestEventPrinter(t *testing.T) {
	var w bytes.Buffer
	p, _ := NewEventPrinter(&w, EventOptions{JSON: true, Kinds: "exit"})
	line := `{"kind":"exit","pid":3,"comm":"x","exit_code":0,"time":"2026-01-02T03:04:05Z","uid":7}`
	for _, l := range []string{`{"kind":"fork","pid":3}`, line} {
		if err := p.Line([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Line([]byte(`{"kind":`)); err == nil {
		t.Error("a malformed line was accepted")
	}
	// A local event's time is its stamp on the wall clock.
	p.clock.Pin(1_767_323_045_000_000_000)
	ev := events.Event{Kind: events.Exit, Mechanism: events.Netlink, Pid: 4, Token: token.Token{Start: 1, Prec: token.Ticks}, Time: 7_000_000_123}
	p.Event(&ev)
	p.Close()
	local := `{"kind":"exit","mechanism":"netlink","pid":4,"ppid":0,"token":"v1:t:00000000000000000000000000000000:1:-","parent_token":null,"comm":"","exit_code":0,"time":"2026-01-02T03:04:12.000000123Z"}`
	if got := string(events.AppendJSONTime(nil, &ev, 0, time.Unix(0, 1_767_323_052_000_000_123))); got != local {
		t.Fatalf("AppendJSONTime = %s, want %s", got, local)
	}
	want := line + "\n" + local + "\n"
	if w.String() != want {
		t.Errorf("JSON output =\n%s\nwant\n%s", w.String(), want)
	}

	// An unstamped event (polling) is timed when it is printed.
	w.Reset()
	p, _ = NewEventPrinter(&w, EventOptions{JSON: true})
	ev.Time = 0
	before := time.Now()
	p.Event(&ev)
	after := time.Now()
	p.Close()
	var rec struct{ Time time.Time }
	if err := json.Unmarshal(w.Bytes(), &rec); err != nil {
		t.Fatalf("%q: %v", w.String(), err)
	}
	if rec.Time.Before(before.Truncate(time.Microsecond)) || rec.Time.After(after) {
		t.Errorf("unstamped event timed %v, want between %v and %v", rec.Time, before, after)
	}

	w.Reset()
	p, _ = NewEventPrinter(&w, EventOptions{})
	p.Event(&ev)
	p.Abort()
	if w.Len() != 0 {
		t.Errorf("an aborted printer printed %q", w.String())
	}
}

// lines is a LineReader over fixed lines, then err.
type lines struct {
	l      []string
	err    error
	closed bool
}

func (l *lines) Next() ([]byte, error) {
	if len(l.l) == 0 {
		return nil, l.err
	}
	s := l.l[0]
	l.l = l.l[1:]
	return []byte(s), nil
}
func (l *lines) Close() error { l.closed = true; return nil }

// TestEventPrinterCopy: Copy prints until the stream fails and returns
// its error, closing it.
func TestEventPrinterCopy(t *testing.T) {
	var w bytes.Buffer
	p, _ := NewEventPrinter(&w, EventOptions{})
	end := errors.New("stream ended")
	st := &lines{l: []string{`{"kind":"fork","pid":3,"ppid":1,"comm":"sh"}`}, err: end}
	if err := p.Copy(context.Background(), st); !errors.Is(err, end) || !st.closed {
		t.Errorf("Copy = %v (closed %v), want %v and the stream closed", err, st.closed, end)
	}
	p.Close()
	if !strings.HasPrefix(w.String(), EventHeader) || !strings.Contains(w.String(), "fork   3        1        -       sh\n") {
		t.Errorf("Copy printed %q", w.String())
	}
}

// FuzzEventLine: whatever a daemon (or something posing as one) sends, a
// line either is refused or prints one line with no control character.
func FuzzEventLine(f *testing.F) {
	f.Add([]byte(`{"kind":"exec","pid":1,"argv":["a","\u001b[41m"],"time":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"kind":"claim","claim":"g-1","reason":"\u009b"}`))
	f.Add([]byte(`{"kind":"lost","count":18446744073709551615}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var w bytes.Buffer
		p, _ := NewEventPrinter(&w, EventOptions{Tokens: true})
		err := p.Line(line)
		p.Close()
		out := strings.TrimPrefix(w.String(), EventHeaderTokens)
		if err != nil {
			if out != "" {
				t.Fatalf("refused line %q printed %q", line, out)
			}
			return
		}
		if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
			t.Fatalf("line %q printed %q, want one line", line, out)
		}
		for _, r := range strings.TrimSuffix(out, "\n") {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("line %q printed a control character: %q", line, out)
			}
		}
	})
}

// countWriter counts the writes that reach it.
type countWriter struct {
	mu sync.Mutex
	n  int
	b  bytes.Buffer
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.b.Write(p)
}

func (c *countWriter) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestEventPrinterFlushOnDemand: a line is flushed about FlushEvery after
// it was printed, and a printer with nothing left to flush has no flush
// due (no timer that would wake it): nothing pending, nothing armed.
func TestEventPrinterFlushOnDemand(t *testing.T) {
	var w countWriter
	p, _ := NewEventPrinter(&w, EventOptions{JSON: true})
	p.Start()
	defer p.Close()
	idle := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.armed && len(p.dirty) == 0 && p.w.Buffered() == 0
	}
	if !idle() {
		t.Fatal("a printer that printed nothing has a flush due")
	}
	for round := 1; round <= 2; round++ {
		ev := events.Event{Kind: events.Exit, Mechanism: events.Netlink, Pid: int32(round)}
		p.Event(&ev)
		p.Event(&ev)
		testenv.Eventually(t, 10*time.Second, func() bool { return w.writes() >= round },
			"round %d: %d writes, want %d", round, w.writes(), round)
		testenv.Eventually(t, 10*time.Second, idle, "round %d: a flush still due after the flush", round)
	}
	if got := strings.Count(w.b.String(), "\n"); got != 4 {
		t.Errorf("%d lines flushed, want 4", got)
	}
}
