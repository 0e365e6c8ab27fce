package view

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/jsonx"
)

// TestControlWriter: a job's output reaches a terminal with its control
// characters shown (\xNN), whole or cut between writes anywhere, and the
// rest as it was.
func TestControlWriter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\n\ttabbed\n", "plain text\n\ttabbed\n"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"\x1b]52;c;aGVsbG8=\x07", `\x1b]52;c;aGVsbG8=\x07`}, // OSC 52: the clipboard
		{"cr\rbs\bdel\x7fnul\x00", `cr\x0dbs\x08del\x7fnul\x00`},
		{"csi\u009b2J osc\u009d52;c;x\u009c", `csi\xc2\x9b2J osc\xc2\x9d52;c;x\xc2\x9c`},
		{"\u0080\u009f\u00a0\u00e9", `\xc2\x80\xc2\x9f` + "\u00a0\u00e9"}, // NBSP and é are not controls
		{"ünï 日本 €", "ünï 日本 €"},
		{"\xc2\xc2\x9b", `\xc2\xc2\x9b`},
		{"lone \x9b and \xff", `lone \x9b and \xff`}, // an 8-bit terminal's CSI
		{"latin-1 caf\xe9.", `latin-1 caf\xe9.`},
		{"ends in \xc2", `ends in \xc2`},
		{"ends in \xe2\x80", `ends in \xe2\x80`},
		{"\xe2\x80\x2e", `\xe2\x80.`},
		{"\xf0\x9f\x98\x80 \xf0\x9f\x98", "\U0001F600 " + `\xf0\x9f\x98`},
		{"safe\u202egnp.exe", `safe\xe2\x80\xaegnp.exe`},                                       // RIGHT-TO-LEFT OVERRIDE
		{"\u2066iso\u2069 \u200f \u061c", `\xe2\x81\xa6iso\xe2\x81\xa9 \xe2\x80\x8f \xd8\x9c`}, // isolates, RLM, ALM
		{"line\u2028sep\u2029", `line\xe2\x80\xa8sep\xe2\x80\xa9`},
		{"\u200b\u2027\u2030", "\u200b\u2027\u2030"}, // neighbours of the escaped ones pass
		{"\xed\xa0\x80", `\xed\xa0\x80`},             // a surrogate is not UTF-8
		{"", ""},
	} {
		if got := writeParts(t, splitBytes(tc.in)); got != tc.want {
			t.Errorf("ControlWriter(%q a byte a write) = %q, want %q", tc.in, got, tc.want)
		}
		// Whole, and cut in two at every byte.
		for cut := 0; cut <= len(tc.in); cut++ {
			var out bytes.Buffer
			c := NewControlWriter(&out)
			for _, part := range []string{tc.in[:cut], tc.in[cut:]} {
				if n, err := c.Write([]byte(part)); n != len(part) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", part, n, err)
				}
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("ControlWriter(%q cut at %d) = %q, want %q", tc.in, cut, got, tc.want)
			}
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("gone") }

func TestControlWriterError(t *testing.T) {
	if n, err := NewControlWriter(failWriter{}).Write([]byte("a\x1b")); n != 0 || err == nil {
		t.Errorf("Write to a failing writer = %d, %v, want 0 and its error", n, err)
	}
}

func splitBytes(s string) []string {
	parts := make([]string, len(s))
	for i := 0; i < len(s); i++ { // bytes, not characters
		parts[i] = s[i : i+1]
	}
	return parts
}

// writeParts writes each part through one ControlWriter and returns what
// reached the terminal.
func writeParts(t testing.TB, parts []string) string {
	var out bytes.Buffer
	c := NewControlWriter(&out)
	for _, part := range parts {
		if n, err := c.Write([]byte(part)); n != len(part) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", part, n, err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// FuzzControlWriter: whatever a job writes, and however its writes are
// cut, the terminal gets UTF-8 with no control but newline and tab and no
// character the JSON encoders escape, the same text for every cut, and
// the job's bytes back when the escapes are read.
func FuzzControlWriter(f *testing.F) {
	f.Add([]byte("\x1b]52;c;aGVsbG8=\x07 \xc2\x9b2J \u202e \x9b \xf0\x9f\x98"), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		whole := writeParts(t, []string{string(in)})
		var parts []string
		for s, n := string(in), int(cut)%7+1; len(s) > 0; s = s[min(n, len(s)):] {
			parts = append(parts, s[:min(n, len(s))])
		}
		if got := writeParts(t, parts); got != whole {
			t.Fatalf("cut every %d bytes: %q, whole: %q", int(cut)%7+1, got, whole)
		}
		if !utf8.ValidString(whole) {
			t.Fatalf("%q reached the terminal: not UTF-8", whole)
		}
		for _, r := range whole {
			if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= utf8.RuneSelf && jsonx.Escaped(r) {
				t.Fatalf("%q reached the terminal with %U", whole, r)
			}
		}
		if back := unescapeHex(whole); back != string(in) && !strings.Contains(string(in), `\x`) {
			t.Fatalf("%q read back as %q, want %q", whole, back, in)
		}
	})
}

// unescapeHex reads each \xNN back as its byte.
func unescapeHex(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			var v byte
			for _, h := range s[i+2 : i+4] {
				v = v<<4 | byte(strings.IndexRune(hexDigits, h))
			}
			b = append(b, v)
			i += 3
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}
