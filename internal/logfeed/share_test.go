package logfeed

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestUserShareWithholdsArgs: a user whose processes' lines pass its byte
// share gets its lines with long arguments written without them (marked,
// the count and size kept), every line still written; another user's and
// root's lines, and the user's lines with short arguments, keep theirs.
// An exit, which carries no ids, is charged to the uid the exec cache
// knew (KnownUID).
func TestUserShareWithholdsArgs(t *testing.T) {
	big := []string{"/usr/bin/prog", strings.Repeat("\x01", 4000)}
	small := []string{"/bin/true", "-x"}
	parent := &events.Desc{Comm: [16]byte{'s', 'h'}, Exe: "/bin/sh", Argv: big,
		Ctx: events.Context{Valid: true, UID: 1000}}
	type line struct {
		uid    uint32
		known  bool // the uid comes from KnownUID (an exit)
		argv   []string
		parent *events.Desc
	}
	for _, tt := range []struct{ schema, args, mark string }{
		{SchemaECS, "process.args", "supervisor.args_withheld"},
		{SchemaOCSF, "process.cmd_line", "unmapped.args_withheld"},
	} {
		t.Run(tt.schema, func(t *testing.T) {
			// 15,000 bytes a second: a burst of 60,000, spent by the
			// user's first two lines of 4,000 control bytes (24,000
			// escaped, twice: about 49,000 a line).
			l, out := newTestLogger(t, Config{Schema: tt.schema, ProcessEvents: AllKinds, UserBytes: 15000, Boot: sampleExec().Token.Boot})
			var sent []line
			send := func(ln line, at uint64) {
				ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 4000 + int32(len(sent)),
					Token: token.Token{Boot: sampleExec().Token.Boot, Start: 100 + uint64(len(sent)), Prec: token.Ticks},
					PPid:  3999, ParentToken: token.Token{Boot: sampleExec().Token.Boot, Start: 99, Prec: token.Ticks},
					Comm: [16]byte{'p', 'r', 'o', 'g'}, Exe: "/usr/bin/prog", Argv: ln.argv, Time: at, Parent: ln.parent}
				if ln.known {
					ev.Kind, ev.Argv, ev.KnownUID, ev.KnownUIDOK = events.Exit, nil, ln.uid, true
				} else {
					ev.Ctx = events.Context{Valid: true, UID: ln.uid}
				}
				l.Event(&ev)
				sent = append(sent, ln)
			}
			const second = 1_000_000_000
			for i := range 6 {
				send(line{uid: 1000, argv: big}, uint64(second+i))
			}
			send(line{uid: 1000, argv: small, parent: parent}, second+10)
			send(line{uid: 1001, argv: big}, second+11)
			send(line{uid: 0, argv: big}, second+12)
			send(line{uid: 1000, known: true, parent: parent}, second+13)
			send(line{uid: 1001, known: true, parent: parent}, second+14)
			// 100 s on, the share is whole again.
			send(line{uid: 1000, argv: big}, 101*second)
			flush(t, l)
			lines := out.lines(t)
			if len(lines) != len(sent) {
				t.Fatalf("%d lines, want %d: every line is written", len(lines), len(sent))
			}
			withheld := func(i int) bool { _, ok := get(lines[i], tt.mark); return ok }
			for i := range 6 {
				if i < 2 && withheld(i) {
					t.Errorf("line %d of uid 1000, within its burst: arguments withheld", i)
				}
			}
			if !withheld(5) {
				t.Fatalf("uid 1000's 6th line of 48 KB, past its share: arguments not withheld: %v", lines[5])
			}
			// Its arguments cut to their first KiB, marked with the real
			// size, not dropped.
			if n := argLen(lines[5], tt.args); n == 0 || n > 1024 {
				t.Errorf("a withheld line's %s holds %d bytes, want its first 1 to 1024", tt.args, n)
			}
			size := "supervisor.args_size"
			if tt.schema == SchemaOCSF {
				size = "unmapped.args_size"
			}
			if n, _ := get(lines[5], size); fmt.Sprint(n) != fmt.Sprint(len(big[0])+len(big[1])+2) {
				t.Errorf("withheld line's args_size = %v, want %d", n, len(big[0])+len(big[1])+2)
			}
			cases := []struct {
				i    int
				want bool
				what string
			}{
				{6, false, "uid 1000's line with short arguments (its parent's long)"},
				{7, false, "uid 1001's line"},
				{8, false, "root's line"},
				{10, false, "uid 1001's exit, whose parent has long arguments"},
				{11, false, "uid 1000's line once its share refilled"},
			}
			for _, c := range cases {
				if withheld(c.i) {
					t.Errorf("%s: arguments withheld", c.what)
				}
			}
			// The exit of uid 1000 (known from the cache) is charged to
			// it: its parent's arguments are withheld.
			pmark := "supervisor.parent.args_withheld"
			if tt.schema == SchemaOCSF {
				pmark = "unmapped.parent.args_withheld"
			}
			pargs := "process.parent.args"
			if tt.schema == SchemaOCSF {
				pargs = "process.parent_process.cmd_line"
			}
			if _, ok := get(lines[10], pargs); !ok {
				t.Errorf("uid 1001's exit: no %s: %v", pargs, lines[10])
			}
			if n := argLen(lines[9], pargs); n == 0 || n > 1024 {
				t.Errorf("uid 1000's exit past its share: %s holds %d bytes, want its first 1 to 1024", pargs, n)
			}
			if _, ok := get(lines[9], pmark); !ok {
				t.Errorf("uid 1000's exit (uid from the exec cache), past its share: parent's arguments not withheld: %v", lines[9])
			}
			// A line with short arguments keeps them whole, its parent's
			// long ones cut.
			if v, _ := get(lines[6], tt.args); fmt.Sprint(v) != fmt.Sprint([]any{"/bin/true", "-x"}) && v != "/bin/true -x" {
				t.Errorf("uid 1000's short arguments past its share: %v, want them whole", v)
			}
			if _, ok := get(lines[6], pmark); !ok {
				t.Errorf("uid 1000's line past its share: its parent's long arguments not marked withheld: %v", lines[6])
			}
			if got := l.Stats().ArgsWithheld; got < 2 {
				t.Errorf("Stats().ArgsWithheld = %d, want at least 2", got)
			}
		})
	}
}

// BenchmarkShareMeter measures what metering adds to a process line: the
// look at its user's bucket and the charge, under the lock (events stamped,
// as the eBPF and netlink sources stamp them).
func BenchmarkShareMeter(b *testing.B) {
	s := newShares(0, nil)
	for i := range 64 {
		s.over(uint32(1000+i), 1)
	}
	now := int64(1)
	b.ReportAllocs()
	for b.Loop() {
		now += 1_000_000 // 1,500 bytes a millisecond: within the share
		sh, over := s.over(1007, now)
		if over {
			b.Fatal("over the share")
		}
		s.charge(sh, 1500, false)
	}
}

// TestShareSubordinates: the subordinate uids of a user draw on its share,
// so a range of them does not multiply it; ranges that name each other do
// not loop.
func TestShareSubordinates(t *testing.T) {
	owner := func(uid uint32) uint32 {
		switch {
		case uid >= 100000 && uid < 165536:
			return 1000
		case uid == 2000:
			return 3000 // 2000 and 3000 each in the other's range
		case uid == 3000:
			return 2000
		}
		return uid
	}
	s := newShares(1000, owner) // a burst of 4,000 bytes
	sh, _ := s.over(100001, 1)
	s.charge(sh, 4000, false)
	for _, uid := range []uint32{1000, 100001, 165535} {
		if _, over := s.over(uid, 1); !over {
			t.Errorf("uid %d: not over after its owner's range spent the owner's share", uid)
		}
	}
	if _, over := s.over(165536, 1); over {
		t.Error("uid 165536, outside the range: over another user's share")
	}
	a, _ := s.over(2000, 1)
	b, _ := s.over(3000, 1)
	if a == nil || b == nil {
		t.Fatal("no bucket for uids whose ranges name each other")
	}
	// A whole range met makes no entry of its own: it would fill
	// maxShares and send every uid met after it to one shared bucket.
	for uid := uint32(100000); uid < 165536; uid++ {
		s.over(uid, 1)
	}
	if n := len(s.byUID); n > 8 {
		t.Errorf("%d buckets after one user's range of 65,536 subordinate uids, want its owner's", n)
	}
}

// TestShareDebtBounded: however much a user's storm overspent, its share
// is whole again 2*shareBurst seconds after it stops.
func TestShareDebtBounded(t *testing.T) {
	s := newShares(1000, nil)
	sh, _ := s.over(1000, 1)
	s.charge(sh, 1<<30, false) // a GiB over a 1,000 B/s share
	if _, over := s.over(1000, 2); !over {
		t.Fatal("not over after a GiB")
	}
	if _, over := s.over(1000, 2+2*shareBurst*1e9+1); over {
		t.Errorf("still over %d s after the storm", 2*shareBurst)
	}
}

// argLen is the bytes of the arguments at path of a line: those of
// process.args (ECS), or of the command line (OCSF).
func argLen(m map[string]any, path string) int {
	v, ok := get(m, path)
	if !ok {
		return 0
	}
	switch a := v.(type) {
	case string:
		return len(a)
	case []any:
		n := 0 // the bound counts no separators in process.args
		for _, s := range a {
			n += len(s.(string))
		}
		return n
	}
	return 0
}

// TestTrimPaths: a path longer than pathKeep in a line of a user over its
// share keeps its end, marked truncated, and never reads as absolute.
func TestTrimPaths(t *testing.T) {
	long := "/" + strings.Repeat("d/", 600) + "prog"
	var c capture
	ev := events.Event{Kind: events.Exec, Exe: long, Argv: []string{"prog"}, Exec: events.ExecInfo{Cwd: "/" + strings.Repeat("é", 400)}}
	got := c.trim(&ev)
	if len(got.Exe) > pathKeep || !strings.HasSuffix(long, got.Exe) || strings.HasPrefix(got.Exe, "/") || !got.Exec.ExeTruncated {
		t.Errorf("executable %d bytes, truncated %v: %.40q...", len(got.Exe), got.Exec.ExeTruncated, got.Exe)
	}
	if !utf8.ValidString(got.Exec.Cwd) || len(got.Exec.Cwd) > pathKeep || !got.Exec.CwdTruncated {
		t.Errorf("directory %d bytes, valid UTF-8 %v, truncated %v", len(got.Exec.Cwd), utf8.ValidString(got.Exec.Cwd), got.Exec.CwdTruncated)
	}
	if ev.Exe != long || ev.Exec.ExeTruncated {
		t.Error("trim changed the event it was given")
	}
	if got.Exec.ArgsWithheld {
		t.Error("short arguments marked withheld")
	}
}
