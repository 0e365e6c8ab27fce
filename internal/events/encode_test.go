package events

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

var (
	testBoot = procfs.BootID{0xb0, 0x07, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	testTok  = token.Token{Boot: testBoot, Start: 4200, Ino: 77, Prec: token.Ticks}
	parTok   = token.Token{Boot: testBoot, Start: 100, Prec: token.Ticks}
)

const (
	testTokText = "v1:t:b0070102030405060708090a0b0c0d0e:4200:77"
	parTokText  = "v1:t:b0070102030405060708090a0b0c0d0e:100:-"
)

func comm(s string) (c [16]byte) {
	copy(c[:], s)
	return c
}

// encodeCases are the events both encoders are tested on, with the line
// each must write.
var encodeCases = []struct {
	name     string
	ev       Event
	wantJSON string
}{
	{
		name:     "fork",
		ev:       Event{Kind: Fork, Mechanism: EBPF, Pid: 42, PPid: 1, Token: testTok, ParentToken: parTok, Comm: comm("sh")},
		wantJSON: `{"kind":"fork","mechanism":"ebpf","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":"` + parTokText + `","comm":"sh"}`,
	},
	{
		name:     "exec with exe, argv and a foreign thread",
		ev:       Event{Kind: Exec, Mechanism: EBPF, Pid: 42, Tid: 43, PPid: 1, Token: testTok, Comm: comm("sleep"), Exe: "/bin/sleep", Argv: []string{"sleep", "1"}},
		wantJSON: `{"kind":"exec","mechanism":"ebpf","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":null,"comm":"sleep","tid":43,"exe":"/bin/sleep","argv":["sleep","1"]}`,
	},
	{
		name: "exec with context",
		ev: Event{Kind: Exec, Mechanism: EBPF, Pid: 42, PPid: 1, Token: testTok, Comm: comm("env"), Exe: "/usr/bin/env", Argv: []string{"env", "a"},
			Exec: ExecInfo{Cwd: "/w", Cgroup: "/docker/c1", ContainerID: "c1", ContainerRuntime: "docker", ArgsCount: 3, ArgsSize: 9000, ArgsTruncated: true},
			Ctx: Context{Valid: true, UID: 1, EUID: 2, SUID: 3, GID: 4, EGID: 5, SGID: 6, Groups: [MaxGroups]uint32{7, 8}, NGroups: 2,
				Audit: true, LoginUID: UnsetID, AuditSession: UnsetID, SID: 40, PGID: 42, SessionLeader: parTok, GroupLeader: testTok,
				TTY: true, StdTTY: true, TTYMajor: 136, TTYMinor: 2, CgroupID: 99, NSPid: 1, PidNS: 4026531836, MntNS: 4026532178}},
		wantJSON: `{"kind":"exec","mechanism":"ebpf","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":null,"comm":"env","exe":"/usr/bin/env","argv":["env","a"],` +
			`"args_count":3,"args_truncated":true,"args_size":9000,"working_directory":"/w","cgroup":"/docker/c1","container":{"id":"c1","runtime":"docker"},` +
			`"user":{"id":"2"},"real_user":{"id":"1"},"saved_user":{"id":"3"},"group":{"id":"5"},"real_group":{"id":"4"},"saved_group":{"id":"6"},` +
			`"supplemental_groups":[{"id":"7"},{"id":"8"}],"session_leader":{"pid":40,"entity_id":"` + parTokText + `"},` +
			`"group_leader":{"pid":42,"entity_id":"` + testTokText + `"},"tty":{"char_device":{"major":136,"minor":2}},"interactive":true,` +
			`"vpid":1,"pid_ns":4026531836,"mnt_ns":4026532178,"cgroup_id":99,"audit":{"login_uid":4294967295,"session_id":4294967295}}`,
	},
	{
		name: "exec with redacted arguments and its parent's description",
		ev: Event{Kind: Exec, Mechanism: EBPF, Pid: 42, PPid: 1, Token: testTok, ParentToken: parTok, Comm: comm("db"), Argv: []string{"db", "--password=[REDACTED]"},
			Exec: ExecInfo{ArgsCount: 2, ArgsRedacted: true},
			Parent: &Desc{Comm: comm("bash"), Exe: "/bin/bash", Argv: []string{"bash", "-c", "x"}, Exec: ExecInfo{Cwd: "/home", ArgsCount: 3, Cgroup: "/x"},
				Ctx: Context{Valid: true, EUID: 1000, SID: 1, PGID: 1}}},
		wantJSON: `{"kind":"exec","mechanism":"ebpf","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":"` + parTokText + `","comm":"db","argv":["db","--password=[REDACTED]"],` +
			`"args_count":2,"args_redacted":true,"parent":{"comm":"bash","exe":"/bin/bash","argv":["bash","-c","x"],"args_count":3,"working_directory":"/home",` +
			`"user":{"id":"1000"},"real_user":{"id":"0"},"group":{"id":"0"},"group_leader":{"pid":1,"entity_id":null},"interactive":false,"vpid":0}}`,
	},
	{
		// A program unlinked and a directory removed before the exec:
		// the names they had, marked; the parent's marks too.
		name: "exec of a deleted program from a removed directory",
		ev: Event{Kind: Exec, Mechanism: Netlink, Pid: 42, PPid: 1, Token: testTok, Comm: comm("passwd"), Exe: "/usr/bin/passwd",
			Exec:   ExecInfo{Cwd: "/root/.ssh", ExeDeleted: true, CwdDeleted: true},
			Parent: &Desc{Comm: comm("sh"), Exe: "/tmp/sh", Exec: ExecInfo{Cwd: "/tmp", ExeDeleted: true}}},
		wantJSON: `{"kind":"exec","mechanism":"netlink","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":null,"comm":"passwd",` +
			`"exe":"/usr/bin/passwd","exe_deleted":true,"working_directory":"/root/.ssh","working_directory_deleted":true,` +
			`"parent":{"comm":"sh","exe":"/tmp/sh","exe_deleted":true,"working_directory":"/tmp"}}`,
	},
	{
		name: "fork whose parent only the graph names",
		ev:   Event{Kind: Fork, Mechanism: EBPF, Pid: 42, PPid: 1, Token: testTok, ParentToken: parTok, Comm: comm("sh"), Parent: &Desc{Comm: comm("init")}},
		wantJSON: `{"kind":"fork","mechanism":"ebpf","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":"` + parTokText + `","comm":"sh",` +
			`"parent":{"comm":"init"}}`,
	},
	{
		name:     "exec by the leader",
		ev:       Event{Kind: Exec, Mechanism: Netlink, Pid: 42, Tid: 42, Token: testTok, Comm: comm("x")},
		wantJSON: `{"kind":"exec","mechanism":"netlink","pid":42,"ppid":0,"token":"` + testTokText + `","parent_token":null,"comm":"x"}`,
	},
	{
		name:     "exit with a code",
		ev:       Event{Kind: Exit, Mechanism: Netlink, Pid: 42, PPid: 1, Token: testTok, Comm: comm("sh"), Status: 7 << 8},
		wantJSON: `{"kind":"exit","mechanism":"netlink","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":null,"comm":"sh","exit_code":7}`,
	},
	{
		name:     "exit by a signal, token unknown",
		ev:       Event{Kind: Exit, Mechanism: Netlink, Pid: 42, Status: 9},
		wantJSON: `{"kind":"exit","mechanism":"netlink","pid":42,"ppid":0,"token":null,"parent_token":null,"comm":"","exit_code":null,"signal":9}`,
	},
	{
		name:     "inferred by a poller",
		ev:       Event{Kind: Fork, Mechanism: ProcPoll, Inferred: true, Pid: 5, PPid: 4, Token: testTok, Comm: comm("p")},
		wantJSON: `{"kind":"fork","mechanism":"proc","pid":5,"ppid":4,"token":"` + testTokText + `","parent_token":null,"comm":"p","inferred":true}`,
	},
	{
		name:     "lost",
		ev:       Event{Kind: Lost, Mechanism: EBPF, Count: 12, Pid: 99},
		wantJSON: `{"kind":"lost","mechanism":"ebpf","count":12}`,
	},
	{
		name:     "full comm, negative pid",
		ev:       Event{Kind: Fork, Mechanism: EBPF, Pid: -1, PPid: 2147483647, Token: testTok, Comm: comm("0123456789abcdef")},
		wantJSON: `{"kind":"fork","mechanism":"ebpf","pid":-1,"ppid":2147483647,"token":"` + testTokText + `","parent_token":null,"comm":"0123456789abcdef"}`,
	},
	{
		name:     "comm and exe that need escaping",
		ev:       Event{Kind: Exec, Mechanism: EBPF, Pid: 3, Token: testTok, Comm: comm("a\"b\\\x01\xff"), Exe: "/tmp/\x7fé"},
		wantJSON: `{"kind":"exec","mechanism":"ebpf","pid":3,"ppid":0,"token":"` + testTokText + `","parent_token":null,"comm":"a\"b\\\u0001\ufffd","exe":"/tmp/\u007fé","invalid_utf8":["comm"]}`,
	},
	{
		// A name cut by the kernel at 15 bytes inside é, and a vector cut
		// at its bound inside é: cut, not marked as not UTF-8. The
		// parent's executable and arguments that are not UTF-8 are.
		name: "cut texts, and a parent's that are not UTF-8",
		ev: Event{Kind: Exec, Mechanism: EBPF, Pid: 3, Token: testTok, Comm: comm("abcdefghijklmn\xc3"),
			Argv: []string{"x", "\xc3"}, Exec: ExecInfo{ArgsCount: 2, ArgsSize: 9, ArgsTruncated: true},
			Parent: &Desc{Comm: comm("sh"), Exe: "/bin/\xff", Argv: []string{"sh", "\xfe", "\xc3"}}},
		wantJSON: `{"kind":"exec","mechanism":"ebpf","pid":3,"ppid":0,"token":"` + testTokText + `","parent_token":null,"comm":"abcdefghijklmn\ufffd",` +
			`"argv":["x","\ufffd"],"args_count":2,"args_truncated":true,"args_size":9,` +
			`"parent":{"comm":"sh","exe":"/bin/\ufffd","argv":["sh","\ufffd","\ufffd"]},"invalid_utf8":["parent.exe","parent.argv"]}`,
	},
	{
		// Not cut: a short name, and the last argument of a whole vector.
		name: "texts that are not UTF-8",
		ev: Event{Kind: Exec, Mechanism: EBPF, Pid: 3, Token: testTok, Comm: comm("ab\xc3"),
			Argv: []string{"x", "\xc3"}, Exec: ExecInfo{Cwd: "/\xff", Cgroup: "/a\xff"}},
		wantJSON: `{"kind":"exec","mechanism":"ebpf","pid":3,"ppid":0,"token":"` + testTokText + `","parent_token":null,"comm":"ab\ufffd",` +
			`"argv":["x","\ufffd"],"working_directory":"/\ufffd","cgroup":"/a\ufffd","invalid_utf8":["comm","argv","working_directory","cgroup"]}`,
	},
	{
		// The process changed its ids after the exec (netlink): they are
		// left out, its own and its parent's, the rest is kept.
		name: "exec whose ids are absent",
		ev: Event{Kind: Exec, Mechanism: Netlink, Pid: 42, PPid: 1, Token: testTok, Comm: comm("su"),
			Ctx: dropped(Context{Valid: true, UID: 1, EUID: 0, GID: 4, Groups: [MaxGroups]uint32{7}, NGroups: 1,
				SID: 40, PGID: 42, TTY: true, StdTTY: true, TTYMajor: 136, TTYMinor: 2, CgroupID: 99, NSPid: 42, PidNS: 4026531836}, CtxIDs),
			Parent: &Desc{Comm: comm("bash"), Ctx: dropped(Context{Valid: true, EUID: 1000, SID: 1, PGID: 1, NSPid: 9}, CtxIDs)}},
		wantJSON: `{"kind":"exec","mechanism":"netlink","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":null,"comm":"su",` +
			`"session_leader":{"pid":40,"entity_id":null},"group_leader":{"pid":42,"entity_id":null},"tty":{"char_device":{"major":136,"minor":2}},` +
			`"interactive":true,"context_absent":["ids"],"vpid":42,"pid_ns":4026531836,"mnt_ns":0,"cgroup_id":99,` +
			`"parent":{"comm":"bash","group_leader":{"pid":1,"entity_id":null},"interactive":false,"vpid":9,"context_absent":["ids"]}}`,
	},
	{
		// It started a session after the exec: session, group and
		// terminal are left out.
		name: "exec whose session is absent",
		ev: Event{Kind: Exec, Mechanism: Netlink, Pid: 42, PPid: 1, Token: testTok, Comm: comm("d"),
			Ctx: dropped(Context{Valid: true, UID: 1, EUID: 1, SUID: 1, GID: 4, EGID: 4, SGID: 4,
				SID: 40, PGID: 42, TTY: true, StdTTY: true, TTYMajor: 136, TTYMinor: 2, CgroupID: 99, NSPid: 42, PidNS: 4026531836}, CtxSession)},
		wantJSON: `{"kind":"exec","mechanism":"netlink","pid":42,"ppid":1,"token":"` + testTokText + `","parent_token":null,"comm":"d",` +
			`"user":{"id":"1"},"real_user":{"id":"1"},"saved_user":{"id":"1"},"group":{"id":"4"},"real_group":{"id":"4"},"saved_group":{"id":"4"},` +
			`"supplemental_groups":[],"context_absent":["session"],"vpid":42,"pid_ns":4026531836,"mnt_ns":0,"cgroup_id":99}`,
	},
}

// dropped returns c with part p absent.
func dropped(c Context, p CtxPart) Context {
	c.Drop(p)
	return c
}

func TestAppendJSON(t *testing.T) {
	for _, c := range encodeCases {
		t.Run(c.name, func(t *testing.T) {
			got := string(AppendJSON([]byte("prefix "), &c.ev))
			if want := "prefix " + c.wantJSON; got != want {
				t.Errorf("AppendJSON(%s) = %s, want %s", c.name, got, want)
			}
			if !json.Valid([]byte(c.wantJSON)) {
				t.Errorf("AppendJSON(%s) is not valid JSON", c.name)
			}
		})
	}
}

// TestAppendJSONOmit: each bit of Omit leaves out its key, and only it
// (absent, not false or zero), and nothing is left out without one.
func TestAppendJSONOmit(t *testing.T) {
	withCtx, withParent := 2, 3 // of encodeCases
	all := OmitInteractive | OmitPidNS | OmitParentToken | OmitSessionLeaderID | OmitGroupLeaderID | OmitParentInteractive | OmitMntNS
	for _, c := range []struct {
		name string
		ev   int // of encodeCases
		o    Omit
		gone []string // the texts of its wantJSON o leaves out
	}{
		{"none", withCtx, 0, nil},
		{"interactive", withCtx, OmitInteractive, []string{`,"interactive":true`}},
		{"pid_ns", withCtx, OmitPidNS, []string{`,"pid_ns":4026531836`}},
		{"mnt_ns", withCtx, OmitMntNS, []string{`,"mnt_ns":4026532178`}},
		{"parent_token", withParent, OmitParentToken, []string{`,"parent_token":"` + parTokText + `"`}},
		{"session_leader.entity_id", withCtx, OmitSessionLeaderID, []string{`,"entity_id":"` + parTokText + `"`}},
		{"group_leader.entity_id", withCtx, OmitGroupLeaderID, []string{`,"entity_id":"` + testTokText + `"`}},
		{"parent.interactive", withParent, OmitParentInteractive, []string{`,"interactive":false`}},
		{"all, of a context", withCtx, all, []string{`,"interactive":true`, `,"pid_ns":4026531836`, `,"mnt_ns":4026532178`,
			`,"entity_id":"` + parTokText + `"`, `,"entity_id":"` + testTokText + `"`, `,"parent_token":null`}},
		// The parent's group leader is not the event's.
		{"all, of a parent", withParent, all, []string{`,"parent_token":"` + parTokText + `"`, `,"interactive":false`}},
	} {
		ec := &encodeCases[c.ev]
		want := ec.wantJSON
		for _, g := range c.gone {
			if strings.Count(want, g) != 1 {
				t.Fatalf("%s: %s is not once in %s", c.name, g, want)
			}
			want = strings.Replace(want, g, "", 1)
		}
		if got := string(AppendJSONOmit(nil, &ec.ev, c.o)); got != want {
			t.Errorf("AppendJSONOmit(%s, %s) =\n%s\nwant\n%s", ec.name, c.name, got, want)
		}
	}
}

// TestAppendJSONInvalidUTF8 decodes the line of an exec whose path has a
// byte that is not UTF-8: it must not read as the path of another file
// whose name is valid UTF-8 (0xff is not ÿ).
func TestAppendJSONInvalidUTF8(t *testing.T) {
	exe := func(path string) string {
		t.Helper()
		var v struct{ Exe string }
		line := AppendJSON(nil, &Event{Kind: Exec, Mechanism: EBPF, Pid: 3, Exe: path})
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v.Exe
	}
	bad, good := exe("/tmp/x\xffy"), exe("/tmp/xÿy")
	if bad == good || bad != "/tmp/x\ufffdy" {
		t.Errorf("exe /tmp/x\\xffy reads %q, /tmp/xÿy reads %q, want %q and the latter", bad, good, "/tmp/x\ufffdy")
	}
}

func TestAppendJSONString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"\x00\n\x1f\x7f", `"\u0000\u000a\u001f\u007f"`},
		{"é€𝄞", `"é€𝄞"`},
		{"\xff", `"\ufffd"`},
		{"a\xe2\x82", `"a\ufffd\ufffd"`},         // a truncated rune
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // a surrogate half
		{"\xc0\xaf", `"\ufffd\ufffd"`},           // an overlong encoding
		{"€\xe2", `"€\ufffd"`},
	}
	for _, c := range cases {
		if got := string(appendJSONString(nil, []byte(c.in))); got != c.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestClen(t *testing.T) {
	cases := []struct {
		in   []byte
		want int
	}{
		{nil, 0},
		{[]byte{0, 'a'}, 0},
		{[]byte("ab\x00c"), 2},
		{[]byte("abc"), 3},
	}
	for _, c := range cases {
		if got := clen(c.in); got != c.want {
			t.Errorf("clen(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestEncodeNoAlloc pins the promise of the event stream: encoding an event
// into a buffer with room allocates nothing.
func TestEncodeNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation changes what allocates")
	}
	buf := make([]byte, 0, 4096)
	for _, c := range encodeCases {
		ev := c.ev
		// A long executable path: converting it to bytes must not copy.
		ev.Exe = strings.Repeat("/long", 20) + ev.Exe
		omitAll := func(b []byte, ev *Event) []byte { return AppendJSONOmit(b, ev, ^Omit(0)) }
		for name, enc := range map[string]func([]byte, *Event) []byte{"AppendJSON": AppendJSON, "AppendJSONOmit": omitAll} {
			if n := testing.AllocsPerRun(100, func() { buf = enc(buf[:0], &ev) }); n != 0 {
				t.Errorf("%s(%s) allocates %v times, want 0", name, c.name, n)
			}
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	ev := encodeCases[1].ev
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], &ev)
	}
}

// FuzzAppendJSON checks that every event encodes to valid JSON that decodes
// back to the same kind and pid.
func FuzzAppendJSON(f *testing.F) {
	f.Add(uint8(Fork), int32(42), int32(1), []byte("sh"), "/bin/sh", "sh", uint32(0), uint64(0), false)
	f.Add(uint8(Exit), int32(7), int32(0), []byte("a\"\\\x00"), "", "", uint32(9), uint64(0), true)
	f.Add(uint8(Lost), int32(0), int32(0), []byte{}, "", "", uint32(0), uint64(3), false)
	f.Fuzz(func(t *testing.T, kind uint8, pid, ppid int32, cm []byte, exe, arg string, status uint32, count uint64, inferred bool) {
		ev := Event{Kind: Kind(kind), Mechanism: EBPF, Pid: pid, Tid: pid + 1, PPid: ppid, Token: testTok,
			Comm: comm(string(cm)), Exe: exe, Argv: []string{arg, exe}, Status: status, Count: count, Inferred: inferred}
		b := AppendJSON(nil, &ev)
		if !json.Valid(b) {
			t.Fatalf("AppendJSON(%+v) = %s, not valid JSON", ev, b)
		}
		var got struct {
			Kind  string `json:"kind"`
			Pid   *int32 `json:"pid"`
			Count uint64 `json:"count"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("AppendJSON(%+v) = %s: %v", ev, b, err)
		}
		if got.Kind != ev.Kind.String() {
			t.Errorf("AppendJSON(%+v) kind = %q, want %q", ev, got.Kind, ev.Kind)
		}
		switch {
		case ev.Kind == Lost && (got.Pid != nil || got.Count != count):
			t.Errorf("AppendJSON(%+v) = %s, want count %d and no pid", ev, b, count)
		case ev.Kind != Lost && (got.Pid == nil || *got.Pid != pid):
			t.Errorf("AppendJSON(%+v) = %s, want pid %d", ev, b, pid)
		}
	})
}

// refJSONString is appendJSONString byte by byte, as it was before plain
// runs were copied whole (with the C1 controls, U+2028 and U+2029 escaped
// since): the reference the fast path must equal.
func refJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		case c < 0x80:
			b = append(b, c)
		default:
			r, n := decodeRune(s[i:])
			if r < 0 {
				b = append(b, `\ufffd`...)
				i++
				continue
			}
			if r <= 0x9f || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Bidi_Control, r) { // C1, a line break or a bidi control
				b = append(b, '\\', 'u', hex[r>>12], hex[r>>8&15], hex[r>>4&15], hex[r&15])
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

func TestAppendJSONStringRuns(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 300)
	for _, s := range []string{
		"", "plain", long, long + "\"" + long, "a\\b", "tab\there", "\x7f", "é and ü", "\xff\xfe",
		"12345678\x00", "1234567\"", "123456\\", "\u2028x", long + "\xc3", "--password=*",
		strings.Repeat("\x1f", 17), strings.Repeat("~", 9) + "\x80",
	} {
		got, want := appendJSONString(nil, []byte(s)), refJSONString(nil, []byte(s))
		if !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

// FuzzAppendJSONString checks the run-copying encoder against the byte by
// byte reference.
func FuzzAppendJSONString(f *testing.F) {
	f.Add([]byte("plain ascii with \"quotes\" and \\ and \x01"))
	f.Add([]byte("\xe2\x82\xac\xff12345678abcdefgh\x7f"))
	f.Fuzz(func(t *testing.T, s []byte) {
		if got, want := appendJSONString(nil, s), refJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

func BenchmarkAppendJSONString(b *testing.B) {
	s := []byte(strings.Repeat("--flag=value-0123456789/abcdefghijklmnopqrstuvwxyz ", 80))
	buf := make([]byte, 0, 8192)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendJSONString(buf[:0], s)
	}
}

// TestAbsentParts: the parts of the event around a context (its name,
// executable and working directory) are named absent beside the
// context's own, and do not make the context itself incomplete: the graph
// keeps the ids and session of an exec whose name netlink dropped.
func TestAbsentParts(t *testing.T) {
	for _, tc := range []struct {
		absent   CtxPart
		names    string
		complete bool
	}{
		{0, `[]`, true},
		{CtxName, `["name"]`, true},
		{CtxExe | CtxCwd, `["exe","cwd"]`, true},
		{CtxIDs | CtxName, `["ids","name"]`, false},
		{CtxCgroup | CtxCwd, `["cgroup","cwd"]`, false},
	} {
		if got := string(AppendAbsentNames(nil, tc.absent)); got != tc.names {
			t.Errorf("AppendAbsentNames(%b) = %s, want %s", tc.absent, got, tc.names)
		}
		c := Context{Valid: true, Absent: tc.absent}
		if c.Complete() != tc.complete {
			t.Errorf("Complete() with %s absent = %v, want %v", tc.names, c.Complete(), tc.complete)
		}
	}
}

// BenchmarkAppendJSONTime is AppendJSON with the line's time, as `events
// --json` and the daemon's stream write it.
func BenchmarkAppendJSONTime(b *testing.B) {
	ev := encodeCases[1].ev
	buf := make([]byte, 0, 4096)
	wall := time.Unix(1_767_323_045, 123_456_789)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSONTime(buf[:0], &ev, 0, wall)
	}
}
