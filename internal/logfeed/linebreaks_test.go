package logfeed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/procsupervisor/supervisor/internal/verdict"
)

// rawLineBreak returns the index in b of the first U+2028, U+2029 or C1
// control written as itself, -1 when none.
func rawLineBreak(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		switch {
		case b[i] == 0xc2 && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			return i
		case b[i] == 0xe2 && i+2 < len(b) && (b[i+1] == 0x80 && (b[i+2]|1 == 0xa9 || b[i+2]|1 == 0x8f || b[i+2]-0xaa < 5) ||
			b[i+1] == 0x81 && b[i+2]-0xa6 < 4):
			return i // U+2028, U+2029 or a bidirectional control
		case b[i] == 0xd8 && b[i+1] == 0x9c:
			return i // U+061C
		}
	}
	return -1
}

func TestEscapeLineBreaks(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct{ in, want string }{
		{``, ``},
		{`{"a":"b"}` + "\n", `{"a":"b"}` + "\n"},
		{`{"exe":"/tmp/` + "\u2028\u2029" + `"}`, `{"exe":"/tmp/\u2028\u2029"}`},
		{`{"a":"` + "\u0080\u0085\u009b\u009f" + `"}`, `{"a":"\u0080\u0085\u009b\u009f"}`},
		{`["` + "\u2028\u0085\u2029\u0085" + `"]`, `["\u2028\u0085\u2029\u0085"]`},
		{`{"` + "k\u2028" + `":"v"}`, `{"k\u2028":"v"}`}, // a key too
		{`"` + "x\u0085{\\\"forged\\\":1}" + `"`, `"x\u0085{\"forged\":1}"`},
		{`"` + "é€✓日\u2028ü\u0085🎉" + `"`, `"é€✓日\u2028ü\u0085🎉"`},
		// Bidirectional controls.
		{"\"rlo\u202eevil \u061c\u200e\u200f\u2066\u2069\"", `"rlo\u202eevil \u061c\u200e\u200f\u2066\u2069"`},
		// Neighbours that stay: U+00A0, U+2027, U+202F, U+2020, U+0100
		// (E2 80 A0..A7 and AA, C2 A0, C4 80).
		{"\"\u00a0\u2027\u202f\u2020\u0100\u061b\u206a\"", "\"\u00a0\u2027\u202f\u2020\u0100\u061b\u206a\""},
		// A 0xC2 or 0xE2 that does not start one, then one that does.
		{"\"\u00c2\u00e2\u00a9\u2022\u2028\"", "\"\u00c2\u00e2\u00a9\u2022\\u2028\""},
		// Bytes that are not UTF-8 (zerolog writes none, but the rewrite
		// must not need that): a sequence cut short is left alone.
		{"\"\xe2\x80\"", "\"\xe2\x80\""},
		{"\"\xc2\"", "\"\xc2\""},
		{"\"\xe2\xe2\x80\xa8\xff\xc2\x85\"", "\"\xe2\\u2028\xff\\u0085\""},
		{"\"" + long + "\u2029\"\n", "\"" + long + "\\u2029\"\n"},
	}
	for _, tt := range tests {
		if got := escapeLineBreaks([]byte("dst:"), []byte(tt.in)); string(got) != tt.want && string(got) != "dst:"+tt.want {
			t.Errorf("escapeLineBreaks(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Every C1 control.
	for r := rune(0x80); r <= 0x9f; r++ {
		in := fmt.Sprintf(`{"a":"x%cy"}`, r)
		if got, want := string(escapeLineBreaks(nil, []byte(in))), fmt.Sprintf(`{"a":"x\u%04xy"}`, r); got != want {
			t.Errorf("escapeLineBreaks(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestEscapeLineBreaksSame: a line with nothing to escape comes back as
// itself, with no copy and no allocation; one with something to escape is
// appended to dst.
func TestEscapeLineBreaksSame(t *testing.T) {
	p := []byte(`{"exe":"/usr/bin/é€","args":["` + strings.Repeat("-v ", 500) + `"]}` + "\n")
	if got := escapeLineBreaks(nil, p); &got[0] != &p[0] || len(got) != len(p) {
		t.Errorf("escapeLineBreaks of a line without line breaks is a copy")
	}
	dst := make([]byte, 0, 2*len(p))
	if n := testing.AllocsPerRun(100, func() { escapeLineBreaks(dst, p) }); n != 0 {
		t.Errorf("escapeLineBreaks of a line without line breaks allocates %v times, want 0", n)
	}
	q := append(bytes.Clone(p[:len(p)-3]), "\u2028\"]}"...)
	if got := escapeLineBreaks(dst, q); &got[0] != &dst[:1][0] || !bytes.HasSuffix(got, []byte(`\u2028"]}`)) {
		t.Errorf("escapeLineBreaks(dst, %q) = %q, not appended to dst", q, got)
	}
	if n := testing.AllocsPerRun(100, func() { escapeLineBreaks(dst, q) }); n != 0 {
		t.Errorf("escapeLineBreaks into a dst with room allocates %v times, want 0", n)
	}
}

// TestZerologLineBreaks pins why escapeLineBreaks exists: zerolog writes
// the characters raw. If a zerolog release escapes them, the rewrite
// finds nothing to do.
func TestZerologLineBreaks(t *testing.T) {
	var b bytes.Buffer
	zl := zerolog.New(&b)
	zl.Log().Str("exe", "/tmp/\u2028\u0085").Msg("")
	line := b.Bytes()
	if rawLineBreak(line) < 0 {
		t.Logf("zerolog now escapes line breaks: %s", line)
	}
	if got := escapeLineBreaks(nil, line); rawLineBreak(got) >= 0 || !json.Valid(got) {
		t.Errorf("escapeLineBreaks(%q) = %q", line, got)
	}
}

// FuzzEscapeLineBreaks: a line zerolog writes with s in a string, a key
// and an array, and s itself when it is JSON, come out holding no raw
// line break and C1 control, and decode to the same value.
func FuzzEscapeLineBreaks(f *testing.F) {
	for _, s := range []string{"", "plain", "/tmp/\u2028\u2029", "x\u0085{\"forged\":1}", "\u009b31m",
		`{"a":"` + "\u2028" + `"}`, "\xe2\xe2\x80\xa8\xff\xc2\x85", `["` + "\u0080" + `",1,null]`,
		"rlo\u202e\u2066\u061c\xd8\xd8\x9c\xe2\x81\xa9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		zl := zerolog.New(&b)
		zl.Log().Str("s", s).Strs("a", []string{s, "x" + s}).Str(s, "k").Msg(s)
		lines := [][]byte{b.Bytes()}
		if json.Valid([]byte(s)) {
			lines = append(lines, []byte(s))
		}
		for _, line := range lines {
			got := escapeLineBreaks(nil, line)
			if at := rawLineBreak(got); at >= 0 {
				t.Fatalf("escapeLineBreaks(%q) = %q: a raw line break or C1 control at byte %d", line, got, at)
			}
			if rawLineBreak(line) < 0 && !bytes.Equal(got, line) {
				t.Fatalf("escapeLineBreaks(%q) = %q, changed a line without line breaks", line, got)
			}
			v, err := decodeAny(line)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			w, err := decodeAny(got)
			if err != nil {
				t.Fatalf("escapeLineBreaks(%q) = %q: %v", line, got, err)
			}
			if !reflect.DeepEqual(v, w) {
				t.Fatalf("escapeLineBreaks(%q) = %q: decodes to %#v, want %#v", line, got, w, v)
			}
		}
	})
}

// decodeAny decodes the JSON value in p, numbers as their text (a valid
// number may not fit a float64).
func decodeAny(p []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// benchLine is an OCSF-sized line of ASCII, about 1.5 KB.
func benchLine(insert string) []byte {
	p := []byte(`{"class_uid":1007,"activity_id":1,"time":1700000000123,"process":{"pid":48213,"cmd_line":"`)
	for len(p) < 1500 {
		p = append(p, "/usr/bin/python3 -m pip install --user --no-cache-dir "...)
	}
	p = append(p, insert...)
	return append(p, `","file":{"path":"/usr/bin/python3"}}}`+"\n"...)
}

func BenchmarkEscapeLineBreaks(b *testing.B) {
	for _, bc := range []struct {
		name string
		line []byte
	}{
		{"ascii", benchLine("")},
		{"u2028", benchLine("\u2028")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(bc.line))
			b.SetBytes(int64(len(bc.line)))
			b.ReportAllocs()
			for b.Loop() {
				escapeLineBreaks(dst[:0], bc.line)
			}
		})
	}
}

// TestFeedLinesEscapeLineBreaks: every line the feed writes, in either
// schema, holds U+2028, U+2029 and the C1 controls only as escapes: the
// ECS process line (jsonx), and the lines zerolog encodes (the OCSF
// process line, a verdict's reason), which capture.Write rewrites.
func TestFeedLinesEscapeLineBreaks(t *testing.T) {
	const exe = "/tmp/a\u2028b\u2029c"
	arg := "x\u0085y\u009bz"
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		t.Run(schema, func(t *testing.T) {
			l, out := newTestLogger(t, Config{Schema: schema, ProcessEvents: AllKinds, UserBytes: -1})
			ev := sampleExec()
			ev.Exe, ev.Argv = exe, []string{"prog", arg}
			l.Event(&ev)
			l.Verdict(verdict.Verdict{Pid: 7, Result: verdict.Foreign, Reason: "reason " + arg + exe, Mechanism: "ebpf"})
			flush(t, l)
			out.mu.Lock()
			raw := append([]byte(nil), out.buf.Bytes()...)
			out.mu.Unlock()
			if i := rawLineBreak(raw); i >= 0 {
				t.Fatalf("a raw line break at byte %d: %q", i, raw[max(0, i-20):min(len(raw), i+20)])
			}
			lines := out.lines(t)
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2", len(lines))
			}
			path := "process.executable"
			if schema == SchemaOCSF {
				path = "process.file.path"
			}
			if got, _ := get(lines[0], path); got != exe {
				t.Errorf("%s = %q, want %q", path, got, exe)
			}
			reason := "event.reason"
			if schema == SchemaOCSF {
				reason = "status_detail"
			}
			if got, _ := get(lines[1], reason); got != "reason "+arg+exe {
				t.Errorf("%s = %q, want the reason whole", reason, got)
			}
		})
	}
}
