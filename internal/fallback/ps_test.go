package fallback

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // TestParseLstartLocation needs a zone on any host

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

var testBoot = procfs.BootID{0xb0, 0x07, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}

func unixOf(t *testing.T, s string) uint64 {
	t.Helper()
	tm, err := time.Parse("Mon Jan _2 15:04:05 2006", s)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(tm.Unix())
}

func TestParsePSRecorded(t *testing.T) {
	type want struct {
		pid, ppid int32
		state     byte
		lstart    string // "" for a partial entry
		comm      string
		args      string // prefix
		argsLen   int    // minimum length
	}
	tests := []struct {
		file    string
		self    int32
		entries int
		want    []want
	}{
		{
			file: "linux-procps-4.0.2.txt", self: 21751, entries: 85,
			want: []want{
				{pid: 1, ppid: 0, state: 'S', lstart: "Sun Nov 29 16:05:42 2026", comm: "init", args: "/sbin/init splash"},
				{pid: 2, ppid: 0, state: 'S', lstart: "Sun Nov 29 16:05:42 2026", comm: "kthreadd", args: "[kthreadd]"},
				{pid: 21755, ppid: 21750, state: 'Z', lstart: "Sun Nov 29 16:18:14 2026", comm: "sleep", args: "[sleep] <defunct>"},
				{pid: 21756, ppid: 21752, state: 'S', lstart: "Sun Nov 29 16:18:14 2026", comm: "my", args: "/tmp/my sleeper (v2) ?? 30"},
				{pid: 21751, ppid: 21643, state: 'S', lstart: "Sun Nov 29 16:18:14 2026", comm: "bash",
					args: "bash /root/.pyenv/libexec/pyenv-exec python3 -c import time; time.sleep(30) arg with  two spaces ??n??c??d??", argsLen: 90000},
			},
		},
		{
			file: "macos-15.txt", self: 4100, entries: 22,
			want: []want{
				{pid: 1, ppid: 0, state: 'S', lstart: "Sun Nov  1 08:01:12 2026", comm: "launchd", args: "/sbin/launchd"},
				{pid: 1217, ppid: 1203, state: 'S', lstart: "Mon Nov 23 09:14:56 2026", comm: "Google", // first word of a path with spaces: comm from ps is a guess
					args: "/Applications/Google Chrome.app/Contents/Frameworks/Google Chrome Framework.framework/Versions/131.0.6778.86/Helpers/Google Chrome Helper (Renderer).app/Contents/MacOS/Google Chrome Helper (Renderer) --type=renderer"},
				{pid: 4117, ppid: 4100, state: 'S', lstart: "Sun Nov 29 16:06:02 2026", comm: "sh",
					args: "/bin/sh -c cd '/Users/jürgen/Documents/Überweisung ☕ 2026' && ./run.sh --name \"日本語 テスト\""},
				{pid: 4120, ppid: 4118, state: 'Z', lstart: "Sun Nov 29 16:06:03 2026", comm: "", args: "<defunct>"},
				{pid: 4121, ppid: 4118, state: 'Z', lstart: "Sun Nov 29 16:06:03 2026", comm: "sleep", args: "(sleep)"},
				{pid: 4122, ppid: 4118, state: 'S', lstart: "Sun Nov 29 16:06:24 2026", comm: "python3.12", args: "(python3.12)"},
				{pid: 4123, ppid: 4118, state: 'R', lstart: "Sun Nov 29 16:06:24 2026", comm: "node",
					args: "/opt/homebrew/Cellar/node/23.3.0/bin/node /Users/jürgen/Documents/Überweisung ☕ 2026/build.js --define:", argsLen: 90000},
				{pid: 4124, ppid: 4100, state: 'S', lstart: "Sun Nov 29 16:06:24 2026", comm: "", args: ""},
				{pid: 99812, ppid: 1, state: 'S', lstart: "Thu Feb 29 23:59:59 2024", comm: "periodic-wrappe", args: "/usr/libexec/periodic-wrapper daily"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile("testdata/ps/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParsePS(out, ParseOptions{Boot: testBoot, Self: tt.self})
			if err != nil {
				t.Fatalf("ParsePS(%s) error: %v", tt.file, err)
			}
			if got := len(s.Entries); got != tt.entries {
				t.Errorf("ParsePS(%s): %d entries, want %d", tt.file, got, tt.entries)
			}
			if s.Partial != 0 {
				t.Errorf("ParsePS(%s): %d partial entries, want 0", tt.file, s.Partial)
			}
			for _, w := range tt.want {
				e := s.Lookup(w.pid)
				if e == nil {
					t.Errorf("Lookup(%d) = nil, want an entry", w.pid)
					continue
				}
				wantTok := token.Token{Boot: testBoot, Start: unixOf(t, w.lstart), Prec: token.Second}
				if e.PPid != w.ppid || e.State != w.state || e.Token != wantTok || e.CommString() != w.comm {
					t.Errorf("pid %d: got ppid %d state %c token %v comm %q, want %d %c %v %q",
						w.pid, e.PPid, e.State, e.Token, e.CommString(), w.ppid, w.state, wantTok, w.comm)
				}
				if !strings.HasPrefix(e.Args, w.args) || len(e.Args) < w.argsLen {
					t.Errorf("pid %d: args %.120q (%d bytes), want prefix %q and at least %d bytes", w.pid, e.Args, len(e.Args), w.args, w.argsLen)
				}
			}
		})
	}
}

func TestParsePSRejects(t *testing.T) {
	const good = "    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\n  500     1 S    Sun Nov 29 16:06:00 2026 supervisor run\n"
	tests := []struct {
		name string
		out  string
	}{
		{"empty", ""},
		{"only blank lines", "\n\n"},
		{"garbage", "Segmentation fault\n"},
		{"binary garbage", "\x00\x01\x02\xff\xfe"},
		{"header line", "  PID  PPID STAT STARTED                  COMMAND\n" + good},
		{"no pid 1", "  500     1 S    Sun Nov 29 16:06:00 2026 supervisor run\n"},
		{"not the supervisor", "    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\n"},
		{"duplicate pid", good + "  500     1 S    Sun Nov 29 16:06:01 2026 forged\n"},
		{"argument with a newline", good + "  600   500 S    Sun Nov 29 16:06:02 2026 sh -c 'echo\nforged'\n"},
		{"blank line inside", "    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\n\n  500     1 S    Sun Nov 29 16:06:00 2026 x\n"},
		{"pid zero or negative", good + "   -3     1 S    Sun Nov 29 16:06:02 2026 x\n"},
		{"pid over int32", good + "99999999999     1 S    Sun Nov 29 16:06:02 2026 x\n"},
		{"ppid missing", good + "  600\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParsePS([]byte(tt.out), ParseOptions{Boot: testBoot, Self: 500})
			if !errors.Is(err, ErrImplausibleTable) || s != nil {
				t.Fatalf("ParsePS(%q) = %v, %v; want nil, ErrImplausibleTable", tt.out, s, err)
			}
			if r, _ := Judge(Claim{Pid: 500, Token: token.Token{Boot: testBoot, Start: 1, Prec: token.Second}}, s, nil); r != verdict.Unverifiable {
				t.Errorf("Judge on a rejected table = %v, want UNVERIFIABLE", r)
			}
		})
	}
}

// A row whose pid and ppid parse but whose later columns do not (a process
// caught half-way) holds the pid without saying who holds it.
func TestParsePSPartialRows(t *testing.T) {
	out := "    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\n" +
		"  500     1 S    Sun Nov 29 16:06:00 2026 supervisor run\n" +
		"  600   500 Z    -\n" +
		"  601   500\n" +
		"  602   500 S    Sat Nov 29 16:06:00 2026 weekday does not match\n" +
		"  603   500 S    Sun Nov 31 16:06:00 2026 no such day\n" +
		"  604   500 S    Sun Nov 29 16:06:00 20x6 bad year\n"
	s, err := ParsePS([]byte(out), ParseOptions{Boot: testBoot, Self: 500})
	if err != nil {
		t.Fatalf("ParsePS error: %v", err)
	}
	if s.Partial != 5 {
		t.Errorf("Partial = %d, want 5", s.Partial)
	}
	claim := token.Token{Boot: testBoot, Start: unixOf(t, "Sun Nov 29 16:06:00 2026"), Prec: token.Second}
	for _, pid := range []int32{600, 601, 602, 603, 604} {
		e := s.Lookup(pid)
		if e == nil || !e.Partial() || e.PPid != 500 {
			t.Errorf("Lookup(%d) = %+v, want a partial entry with ppid 500", pid, e)
		}
		if r, why := Judge(Claim{Pid: pid, Token: claim, Since: time.Now()}, s, nil); r != verdict.Unverifiable {
			t.Errorf("Judge(pid %d, partial row) = %v (%s), want UNVERIFIABLE", pid, r, why)
		}
	}
}

func TestParseLstartLocation(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err) // time/tzdata is linked in: always there
	}
	tests := []struct {
		in   string
		loc  *time.Location
		want int64
	}{
		{"Sun Nov 29 16:06:24 2026", time.UTC, time.Date(2026, 11, 29, 16, 6, 24, 0, time.UTC).Unix()},
		{"Sun Nov  1 01:30:00 2026", time.UTC, time.Date(2026, 11, 1, 1, 30, 0, 0, time.UTC).Unix()},
		{"Sun Nov 29 16:06:24 2026", ny, time.Date(2026, 11, 29, 21, 6, 24, 0, time.UTC).Unix()},
	}
	for _, tt := range tests {
		var f [5][]byte
		rest := []byte(tt.in)
		for i := range f {
			f[i], rest = nextField(rest)
		}
		got, ok := parseLstart(f, tt.loc)
		if !ok || got != tt.want {
			t.Errorf("parseLstart(%q, %v) = %d, %v; want %d, true", tt.in, tt.loc, got, ok, tt.want)
		}
	}
}

func FuzzParsePS(f *testing.F) {
	for _, name := range []string{"linux-procps-4.0.2.txt", "macos-15.txt"} {
		b, err := os.ReadFile("testdata/ps/" + name)
		if err != nil {
			f.Fatal(err)
		}
		if i := bytes.IndexByte(b[4096:], '\n'); i >= 0 {
			b = b[:4096+i+1] // keep seeds small
		}
		f.Add(b, int32(1))
	}
	f.Fuzz(func(t *testing.T, out []byte, self int32) {
		s, err := ParsePS(out, ParseOptions{Boot: testBoot, Self: self})
		if err != nil {
			if !errors.Is(err, ErrImplausibleTable) || s != nil {
				t.Fatalf("ParsePS error %v with snapshot %v", err, s != nil)
			}
			return
		}
		if s.Lookup(1) == nil || s.Lookup(self) == nil {
			t.Fatal("accepted a table without pid 1 or self")
		}
		partial := 0
		for i, e := range s.Entries {
			if i > 0 && s.Entries[i-1].Pid >= e.Pid {
				t.Fatalf("entries not sorted and unique at %d", i)
			}
			if s.Lookup(e.Pid) != &s.Entries[i] {
				t.Fatalf("Lookup(%d) does not find entry %d", e.Pid, i)
			}
			if e.Partial() {
				partial++
			} else if e.Token.Prec != token.Second || e.Token.Boot != testBoot {
				t.Fatalf("entry %d token %v", i, e.Token)
			}
		}
		if partial != s.Partial {
			t.Fatalf("Partial = %d, counted %d", s.Partial, partial)
		}
	})
}
