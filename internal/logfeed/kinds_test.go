package logfeed

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
)

func TestParseKinds(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Kinds
		wantErr string // a part of the error; "" for none
	}{
		{"true", AllKinds, ""},
		{"1", AllKinds, ""},
		{"TRUE", AllKinds, ""},
		{"false", 0, ""},
		{"0", 0, ""},
		{"fork", Forks, ""},
		{"exec", Execs, ""},
		{"exit", Exits, ""},
		{"exec,exit", Execs | Exits, ""},
		{"exit,fork", Forks | Exits, ""},
		{" exec , exit ", Execs | Exits, ""},
		{"fork,exec,exit", AllKinds, ""},
		{"", 0, `"": an empty kind`},
		{"exec,", 0, `"exec,": an empty kind`},
		{",", 0, "an empty kind"},
		{"exec,,exit", 0, "an empty kind"},
		{"lost", 0, `unknown kind "lost"`},
		{"Exec", 0, `unknown kind "Exec"`},
		{"exec;exit", 0, `unknown kind "exec;exit"`},
		{"execs", 0, `"execs": unknown kind`},
		{"exec,exec", 0, `"exec,exec": exec given twice`},
		{"exit,fork,exit", 0, "exit given twice"},
		{"yes", 0, `unknown kind "yes"`},
		{strings.Repeat("exec,", 20), 0, "longer than 64 bytes"},
	} {
		got, err := ParseKinds(tt.in)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParseKinds(%q) = %v", tt.in, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfig)):
			t.Errorf("ParseKinds(%q) = %v, %v, want an error with %q wrapping ErrConfig", tt.in, got, err, tt.wantErr)
		case got != tt.want:
			t.Errorf("ParseKinds(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestKindsText: String and MarshalJSON give what ParseKinds and
// UnmarshalJSON read back, for every set.
func TestKindsText(t *testing.T) {
	wantText := map[Kinds]string{
		0: "false", Forks: "fork", Execs: "exec", Exits: "exit",
		Forks | Execs: "fork,exec", Execs | Exits: "exec,exit", Forks | Exits: "fork,exit",
		AllKinds: "fork,exec,exit",
	}
	for k := range AllKinds + 1 {
		if k&^AllKinds != 0 {
			continue
		}
		if got := k.String(); got != wantText[k] {
			t.Errorf("Kinds(%#x).String() = %q, want %q", uint8(k), got, wantText[k])
		}
		back, err := ParseKinds(k.String())
		if err != nil || back != k {
			t.Errorf("ParseKinds(%q) = %v, %v, want %v", k.String(), back, err, k)
		}
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		var j Kinds
		if err := json.Unmarshal(b, &j); err != nil || j != k {
			t.Errorf("Unmarshal(%s) = %v, %v, want %v", b, j, err, k)
		}
	}
	if got, want := Kinds(1).String(), "0x1"; got != want {
		t.Errorf("Kinds(1).String() = %q, want %q", got, want)
	}
}

func TestKindsUnmarshalJSON(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Kinds
		ok   bool
	}{
		{`true`, AllKinds, true},
		{`false`, 0, true},
		{`"exec"`, Execs, true},
		{`"exec,exit"`, Execs | Exits, true},
		{`"true"`, AllKinds, true},
		{`""`, 0, false},
		{`"exec,exec"`, 0, false},
		{`"spawn"`, 0, false},
		{`null`, 0, false},
		{`1`, 0, false},
		{`["exec"]`, 0, false},
	} {
		k := Forks // what a failed decode must leave alone
		err := json.Unmarshal([]byte(tt.in), &k)
		switch {
		case tt.ok && (err != nil || k != tt.want):
			t.Errorf("Unmarshal(%s) = %v, %v, want %v", tt.in, k, err, tt.want)
		case !tt.ok && (err == nil || k != Forks):
			t.Errorf("Unmarshal(%s) = %v, %v, want an error and the value unchanged", tt.in, k, err)
		}
	}
}

func TestKindsHas(t *testing.T) {
	k := Execs | Exits
	for _, tt := range []struct {
		kind events.Kind
		want bool
	}{{events.Fork, false}, {events.Exec, true}, {events.Exit, true}, {events.Lost, false}, {0, false}, {255, false}} {
		if got := k.Has(tt.kind); got != tt.want {
			t.Errorf("(%v).Has(%v) = %v, want %v", k, tt.kind, got, tt.want)
		}
	}
}

// TestEventKinds: a Logger writes a process line only for the kinds it
// was given, and a loss line whatever they are.
func TestEventKinds(t *testing.T) {
	for _, tt := range []struct {
		kinds Kinds
		want  []string // actions, in order
	}{
		{0, []string{ActionEventsLost}},
		{Execs, []string{ActionProcessExec, ActionEventsLost}},
		{Forks | Exits, []string{ActionProcessStarted, ActionProcessEnded, ActionEventsLost}},
		{Exits, []string{ActionProcessEnded, ActionEventsLost}},
		{AllKinds, []string{ActionProcessStarted, ActionProcessExec, ActionProcessEnded, ActionEventsLost}},
	} {
		for _, schema := range []string{SchemaECS, SchemaOCSF} {
			l, out := newTestLogger(t, Config{Schema: schema, ProcessEvents: tt.kinds})
			l.Event(&events.Event{Kind: events.Fork, Pid: 4242, PPid: 1, Mechanism: events.EBPF})
			l.Event(&events.Event{Kind: events.Exec, Pid: 4242, Mechanism: events.EBPF, Exe: "/bin/true", Argv: []string{"true"}})
			l.Event(&events.Event{Kind: events.Exit, Pid: 4242, Mechanism: events.EBPF})
			l.Event(&events.Event{Kind: events.Lost, Mechanism: events.EBPF, Count: 2})
			flush(t, l)
			var got []string
			for _, line := range out.lines(t) {
				if schema == SchemaECS {
					got = append(got, getString(line, "event.action"))
				} else {
					got = append(got, getString(line, "unmapped.action"))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s with kinds %v: lines %q, want %q", schema, tt.kinds, got, tt.want)
			}
			if st := l.Stats(); st.Written != uint64(len(tt.want)) || st.Dropped != 0 {
				t.Errorf("%s with kinds %v: stats %+v, want %d written, none dropped", schema, tt.kinds, st, len(tt.want))
			}
		}
	}
}

func TestNewRefusesUnknownKinds(t *testing.T) {
	_, err := New(Config{Writer: &lineBuf{}, ProcessEvents: AllKinds | 1})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("New(ProcessEvents with an unknown bit) = %v, want ErrConfig", err)
	}
}

func FuzzParseKinds(f *testing.F) {
	for _, s := range []string{"true", "false", "exec", "exec,exit", "fork,exec,exit", "", ",", "exec,exec", " fork ,exit"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKinds(s)
		if err != nil {
			if k != 0 || !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseKinds(%q) = %v, %v, want 0 and ErrConfig", s, k, err)
			}
			return
		}
		if k&^AllKinds != 0 {
			t.Fatalf("ParseKinds(%q) = %#x, outside AllKinds", s, uint8(k))
		}
		if back, err := ParseKinds(k.String()); err != nil || back != k {
			t.Fatalf("ParseKinds(%q) = %v, but ParseKinds(%q) = %v, %v", s, k, k.String(), back, err)
		}
		var j Kinds
		if b, _ := json.Marshal(s); json.Unmarshal(b, &j) != nil || j != k {
			t.Fatalf("UnmarshalJSON(%q) = %v, want %v as ParseKinds", b, j, k)
		}
	})
}

// BenchmarkEventKinds measures what the feed costs the event path per
// exec of a storm (a fork, an exec with 4 KiB of arguments, an exit) with
// every kind logged, exec lines only, and none: a kind not chosen should
// cost next to nothing.
func BenchmarkEventKinds(b *testing.B) {
	exec := sampleArgs4K()
	fork := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: exec.Pid, PPid: exec.PPid, Token: exec.Token, ParentToken: exec.ParentToken, Ctx: exec.Ctx}
	exit := events.Event{Kind: events.Exit, Mechanism: events.EBPF, Pid: exec.Pid, PPid: exec.PPid, Token: exec.Token, ParentToken: exec.ParentToken}
	for _, k := range []Kinds{AllKinds, Execs, 0} {
		b.Run(k.String(), func(b *testing.B) {
			l, err := New(Config{Writer: io.Discard, ProcessEvents: k, Hostname: "vm"})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close(context.Background())
			for range DefaultBufferLines { // give the ring its buffers
				l.Event(&fork)
				l.Event(&exec)
				l.Event(&exit)
			}
			l.Flush(context.Background())
			b.ReportAllocs()
			for b.Loop() {
				l.Event(&fork)
				l.Event(&exec)
				l.Event(&exit)
			}
			b.StopTimer()
			l.Flush(context.Background())
			b.ReportMetric(float64(l.Stats().Dropped)/float64(b.N), "dropped/op")
		})
	}
}
