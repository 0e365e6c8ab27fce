package logfeed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/userdb"
)

// encoders returns the ECS encoder with its clock pinned (so that two
// encodings of one event have the same times) and a function that encodes
// an event with the one-pass encoder and with the zerolog reference.
func encoders(t testing.TB) func(action string, ev *events.Event) (got, want []byte) {
	h := newHost(Config{Hostname: "host \"q\"", Version: "1.2", Boot: sampleExec().Token.Boot,
		Names: userdb.New("../userdb/testdata/passwd", "../userdb/testdata/group")})
	h.clock.Pin(1_700_000_000_000_000_000) // never resampled
	x := newECS(h)
	// One procLine for every line, as a capture keeps it: what it kept of
	// earlier lines must not show in later ones.
	var w procLine
	return func(action string, ev *events.Event) (got, want []byte) {
		if ev.Time == 0 { // an unstamped event is "now": not the same twice
			ev.Time = 42
		}
		w.b = w.b[:0]
		x.procEvent(&w, action, ev)
		ref := &capture{action: action, direct: true}
		x.refEvent(ref, ev)
		// zerolog writes U+2028, U+2029, the C1 and the bidirectional
		// controls raw, only inside strings: the one-pass encoder
		// escapes them.
		want = ref.dst
		for r := rune(0x80); r <= 0x2069; r++ {
			if r <= 0x9f || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Bidi_Control, r) {
				want = bytes.ReplaceAll(want, []byte(string(r)), []byte(fmt.Sprintf(`\u%04x`, r)))
			}
		}
		return append([]byte(nil), w.b...), want
	}
}

// richExec is an exec with every part of the context set.
func richExec() events.Event {
	ev := sampleTTY()
	ev.Time = 123_456_789_000
	ev.Ctx.NGroups = 2
	ev.Ctx.Groups[0], ev.Ctx.Groups[1] = 0, 27
	ev.Ctx.Audit, ev.Ctx.LoginUID, ev.Ctx.AuditSession = true, 1000, 5
	ev.Ctx.SessionLeader, ev.Ctx.GroupLeader = ev.ParentToken, ev.Token
	ev.Ctx.StdTTY = true
	ev.Exec.Cgroup = "/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope"
	ev.Exec.ContainerID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	ev.Exec.ContainerRuntime = "docker"
	ev.Exec.ArgsTruncated, ev.Exec.ArgsSize = true, 99999
	ev.Exec.ExeTruncated, ev.Exec.CwdTruncated, ev.Exec.CgroupTruncated = true, true, true
	ev.Exec.ExeDeleted, ev.Exec.CwdDeleted = true, true
	ev.Ctx.MntNS = 4026532178
	ev.Parent.Exec.ArgsRedacted = true
	ev.Parent.Exec.CwdTruncated = true
	ev.Parent.Exec.ExeDeleted = true
	ev.Tid = 48214
	return ev
}

// inferredFork is a poller's fork, whose process /proc described as for
// an exec: its arguments cut, its executable deleted, its cgroup known.
func inferredFork() events.Event {
	ev := richExec()
	ev.Kind, ev.Mechanism, ev.Inferred, ev.Tid = events.Fork, events.Netlink, true, 0
	ev.Exec.ExeTruncated, ev.Exec.CwdTruncated, ev.Exec.CgroupTruncated = false, false, false
	return ev
}

// TestInferredForkMarks: a poller's fork line, described from /proc, says
// what is cut or deleted and names its cgroup, as an exec line does; both
// encoders left all of it out of every line but an exec's, and the line
// showed cut arguments as whole.
func TestInferredForkMarks(t *testing.T) {
	enc := encoders(t)
	ev := inferredFork()
	got, want := enc(ActionProcessStarted, &ev)
	for _, line := range [][]byte{got, want} {
		var m struct {
			Supervisor map[string]any `json:"supervisor"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		for _, k := range []string{"args_truncated", "args_size", "executable_deleted", "working_directory_deleted", "cgroup"} {
			if _, ok := m.Supervisor[k]; !ok {
				t.Errorf("inferred fork line lacks supervisor.%s: %s", k, line)
			}
		}
	}
}

// TestProcessLineEncoders: the one-pass encoder writes the line the
// zerolog encoder wrote, byte for byte, for every kind of process event.
func TestProcessLineEncoders(t *testing.T) {
	enc := encoders(t)
	long := strings.Repeat("x", DefaultArgsBytes/3)
	type tc struct {
		name   string
		action string
		ev     func() events.Event
	}
	tests := []tc{
		{"exec", ActionProcessExec, sampleExec},
		{"exec with parent", ActionProcessExec, sampleParented},
		{"exec with tty", ActionProcessExec, sampleTTY},
		{"exec with everything", ActionProcessExec, richExec},
		{"fork", ActionProcessStarted, func() events.Event {
			ev := richExec()
			ev.Kind, ev.Argv, ev.Exe, ev.Exec = events.Fork, nil, "", events.ExecInfo{}
			ev.Ctx.NGroups = events.MaxGroups + 3
			return ev
		}},
		{"exit with a code", ActionProcessEnded, func() events.Event {
			ev := richExec()
			ev.Kind, ev.Status = events.Exit, 3<<8
			return ev
		}},
		{"exit by a signal", ActionProcessEnded, func() events.Event {
			ev := sampleParented()
			ev.Kind, ev.Status, ev.Time = events.Exit, 9, 0
			return ev
		}},
		{"inferred fork, described from /proc", ActionProcessStarted, inferredFork},
		{"inferred, no token", ActionProcessStarted, func() events.Event {
			return events.Event{Kind: events.Fork, Mechanism: events.Netlink, Pid: 9, PPid: 1, Inferred: true, Time: 1}
		}},
		{"bare", ActionProcessEnded, func() events.Event {
			return events.Event{Kind: events.Exit, Pid: 9, Time: 1}
		}},
		{"count without args", ActionProcessExec, func() events.Event {
			ev := sampleExec()
			ev.Argv, ev.Exec.ArgsCount, ev.Time = nil, 4, 1
			return ev
		}},
		{"escapes", ActionProcessExec, func() events.Event {
			ev := sampleParented()
			ev.Time = 1
			ev.Argv = []string{"a\"b", "tab\there", "nl\n", "\x00\x1f", `back\slash`, "", "ünï ✓"}
			ev.Exe, ev.Exec.Cwd = "/tmp/\"odd\"\n", "/home/ü"
			copy(ev.Comm[:], "a\"\\\x01")
			return ev
		}},
		{"not UTF-8", ActionProcessExec, func() events.Event {
			ev := richExec()
			ev.Argv = []string{"a\xff", "\xe2\x82"}
			ev.Exe, ev.Exec.Cwd, ev.Exec.Cgroup = "/tmp/\xc0", "/\xed\xa0\x80", "/\xfe"
			ev.Parent.Argv, ev.Parent.Exe = []string{"\x80"}, "/\xff"
			copy(ev.Comm[:], "\xf8")
			copy(ev.Parent.Comm[:], "\xf8")
			return ev
		}},
		{"args past DefaultArgsBytes", ActionProcessExec, func() events.Event {
			ev := sampleParented()
			ev.Time = 1
			ev.Argv = []string{long, long, long, long, "tail"}
			ev.Parent.Argv = []string{long + "\"\"", long, long + "ü"}
			return ev
		}},
		{"cut inside a character", ActionProcessExec, func() events.Event {
			ev := sampleExec()
			ev.Time = 1
			ev.Argv = []string{strings.Repeat("é", DefaultArgsBytes)}
			return ev
		}},
		{"no container", ActionProcessExec, func() events.Event {
			ev := richExec()
			ev.Exec.ContainerID, ev.Exec.ContainerRuntime = "", ""
			return ev
		}},
		{"container of unknown runtime", ActionProcessExec, func() events.Event {
			ev := richExec()
			ev.Exec.ContainerRuntime = ""
			return ev
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := tt.ev()
			got, want := enc(tt.action, &ev)
			if !bytes.Equal(got, want) {
				t.Errorf("one-pass line differs from zerolog's:\n got %s\nwant %s", got, want)
			}
			if !json.Valid(got) || !utf8.Valid(got) {
				t.Errorf("line is not valid UTF-8 JSON: %s", got)
			}
		})
	}
}

// FuzzProcessLine: whatever the strings of an event, the one-pass line is
// valid UTF-8 JSON, the same bytes as the zerolog line; a strict decoder
// reads each text back as it was, every byte that is not UTF-8 as U+FFFD,
// and the line names exactly the texts that had such bytes.
func FuzzProcessLine(f *testing.F) {
	f.Add("/usr/bin/python3", "/home/user", "python3", "-m\x00http.server", "bash\x00-c", int32(7), uint32(1000))
	f.Add("/bin/\xff", "/\"q\"", "a\nb", "\xe2\x82\x00x", "", int32(-1), uint32(0))
	f.Add("/tmp/\u2028\u2029", "/\ufffd\xef\xbf", "\x7f\x1b[31m", "\xed\xa0\x80\x00\xc0\xaf\x00\xf4\x90\x80\x80", "\\\x00\"", int32(0), uint32(4294967295))
	f.Add(strings.Repeat("/\xff", 2000), strings.Repeat("é", 3000), "ééééééé", strings.Repeat("a\x00", 3000)+strings.Repeat("\xff", DefaultArgsBytes), "", int32(1), uint32(1))
	enc := encoders(f)
	f.Fuzz(func(t *testing.T, exe, cwd, comm, args, pargs string, tid int32, uid uint32) {
		ev := richExec()
		ev.Exe, ev.Exec.Cwd, ev.Exec.Cgroup = exe, cwd, cwd
		ev.Comm = [16]byte{}
		copy(ev.Comm[:], comm)
		ev.Argv = strings.Split(args, "\x00")
		ev.Parent.Argv = strings.Split(pargs, "\x00")
		// Numbered as the exec cache numbers images: the same numbers on
		// other arguments at every call, which the kept text must never
		// stand for.
		ev.Exec.Image, ev.Parent.Exec.Image = 1, 2
		ev.Tid, ev.Ctx.UID = tid, uid
		got, want := enc(ActionProcessExec, &ev)
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Fatalf("line is not valid UTF-8 JSON: %q", got)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("one-pass line decodes differently:\n got %q\nwant %q", got, want)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("one-pass line differs from zerolog's:\n got %q\nwant %q", got, want)
		}
		line := g.(map[string]any)
		marked := map[string]bool{}
		if v, ok := get(line, "supervisor.invalid_utf8"); ok {
			for _, f := range v.([]any) {
				marked[f.(string)] = true
			}
		}
		// string([]rune(s)) is s with U+FFFD for each byte not UTF-8.
		for _, tt := range []struct{ field, text string }{{"process.executable", exe}, {"process.working_directory", cwd}} {
			if v, _ := get(line, tt.field); tt.text != "" && v != string([]rune(tt.text)) {
				t.Fatalf("%s decodes as %q, want %q", tt.field, v, string([]rune(tt.text)))
			}
			if marked[tt.field] == utf8.ValidString(tt.text) {
				t.Fatalf("%s %q: marked as not UTF-8 %v", tt.field, tt.text, marked[tt.field])
			}
		}
		if !lineCut(ev.Argv, DefaultArgsBytes) {
			valid := true
			v, _ := get(line, "process.args")
			for i, a := range v.([]any) {
				if a != string([]rune(ev.Argv[i])) {
					t.Fatalf("process.args[%d] decodes as %q, want %q", i, a, string([]rune(ev.Argv[i])))
				}
				valid = valid && utf8.ValidString(ev.Argv[i])
			}
			if marked["process.args"] == valid || marked["process.command_line"] == valid {
				t.Fatalf("args %q: marked as not UTF-8 %v", ev.Argv, marked["process.args"])
			}
		}
	})
}

// TestProcLineCaches: the time a procLine writes from what it kept is
// appendTime's, across seconds in any order.
func TestProcLineCaches(t *testing.T) {
	var w procLine
	base := time.Date(2026, 12, 1, 6, 59, 59, 999999000, time.UTC)
	for _, tm := range []time.Time{
		base, base.Add(time.Microsecond), base, base.Add(-time.Hour), base.Add(time.Second),
		base.Add(-time.Hour), base.Add(2 * time.Second), time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 5).In(time.FixedZone("x", 3600)), base,
	} {
		if got, want := w.appendTime(nil, tm), appendTime(nil, tm); !bytes.Equal(got, want) {
			t.Errorf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
}

// TestProcLineKeeps: lines written by one procLine, which keeps the text of
// recent instances and contexts, are the lines a fresh procLine writes,
// whatever changes from line to line: the pid, the token, one id of the
// context, the namespace pid, the boot clock's offset, the user database.
func TestProcLineKeeps(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(passwd, []byte("carol:x:1000:1000::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(Config{Hostname: "vm", Boot: sampleExec().Token.Boot,
		Names: userdb.New("../userdb/testdata/passwd", "../userdb/testdata/group")})
	h.clock.Pin(1_700_000_000_000_000_000)
	x := newECS(h)
	base := richExec()
	// Images numbered as the exec cache numbers them, so that their
	// arguments' text is kept.
	base.Exec.Image = 3
	pd := *base.Parent
	pd.Exec.Image = 4
	base.Parent = &pd
	other := base
	other.Pid, other.Token.Ino = other.Pid+1, other.Token.Ino+1
	other.Ctx.NSPid++
	setuid := base
	setuid.Ctx.EUID = 0
	fork := base
	fork.Kind, fork.Argv, fork.Exe, fork.Exec = events.Fork, nil, "", events.ExecInfo{}
	pidReused := base
	pidReused.Token.Ino += 100
	noTTY := other
	noTTY.Ctx.TTY = false
	exit := base
	exit.Kind, exit.Exec.Cwd = events.Exit, ""
	rewritten := base // the same number on other arguments
	rewritten.Argv = append([]string{"rewritten"}, base.Argv[1:]...)
	rpd := pd
	rpd.Argv = append([]string(nil), pd.Argv...)
	rpd.Argv[len(rpd.Argv)-1] = "changed"
	rewritten.Parent = &rpd
	withheld := base
	withheld.Argv, withheld.Exec.ArgsCount = nil, 0
	steps := []struct {
		name   string
		action string
		ev     events.Event
		before func()
	}{
		{"exec", ActionProcessExec, base, nil},
		{"the same again", ActionProcessExec, base, nil},
		{"another child, another vpid", ActionProcessExec, other, nil},
		{"euid changed", ActionProcessExec, setuid, nil},
		{"fork", ActionProcessStarted, fork, nil},
		{"the pid reused", ActionProcessExec, pidReused, nil},
		{"no terminal", ActionProcessExec, noTTY, nil},
		{"its exit", ActionProcessEnded, exit, nil},
		{"the image's number on other arguments", ActionProcessExec, rewritten, nil},
		{"the arguments withheld", ActionProcessExec, withheld, nil},
		{"the wall clock stepped", ActionProcessExec, base, func() { h.clock.Pin(1_700_000_000_000_000_000 + 3_600_000_000_000) }},
		{"another user database", ActionProcessExec, base, func() { h.names = userdb.New(passwd, filepath.Join(dir, "group")) }},
		{"no user database", ActionProcessExec, base, func() { h.names = nil }},
		{"back to the first", ActionProcessExec, base, nil},
	}
	var kept procLine
	lines := map[string]string{}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		ev := st.ev
		kept.b = kept.b[:0]
		x.procEvent(&kept, st.action, &ev)
		var fresh procLine
		x.procEvent(&fresh, st.action, &ev)
		if !bytes.Equal(kept.b, fresh.b) {
			t.Errorf("%s: kept text shows:\n got %s\nwant %s", st.name, kept.b, fresh.b)
		}
		lines[st.name] = string(kept.b)
	}
	// The changes the steps make show in the lines: the kept text was
	// replaced, not merely equal by chance.
	for _, c := range []struct{ a, b, sub string }{
		{"the wall clock stepped", "another user database", `"name":"carol"`},
		{"another user database", "no user database", `"name":"carol"`},
		{"its exit", "the image's number on other arguments", `"rewritten"`},
		{"its exit", "the image's number on other arguments", `"changed"`},
		{"exec", "the arguments withheld", `"args":["python3"`},
	} {
		if strings.Contains(lines[c.a], c.sub) == strings.Contains(lines[c.b], c.sub) {
			t.Errorf("%q and %q agree on %s", c.a, c.b, c.sub)
		}
	}
	if lines["the same again"] == lines["the wall clock stepped"] {
		t.Error("the line after the clock stepped is the line before it")
	}
}
