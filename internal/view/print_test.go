package view

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestJSONEscapesTerminalControls: what a user chose (an argument, an
// owner label, a cwd, even a map key) reaches root's terminal from a
// --json view with no C1 control (U+009B is CSI, U+009D OSC), no line
// separator and no bidirectional control raw, and decodes to what it was.
func TestJSONEscapesTerminalControls(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "sleep 600 ünï 日本 <&>", `"sleep 600 ünï 日本 <&>"`},
		{"C0 and DEL", "a\x1b[2J\x07\x7f", `"a\u001b[2J\u0007\u007f"`},
		{"CSI", "a\u009b2Jb", `"a\u009b2Jb"`},
		{"OSC 52", "\u009d52;c;aGk=\u009c", `"\u009d52;c;aGk=\u009c"`},
		{"every C1", "\u0080\u0085\u009f\u00a0", `"\u0080\u0085\u009f` + "\u00a0" + `"`},
		{"line and paragraph separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"right-to-left override", "\u202eevil\u202c", `"\u202eevil\u202c"`},
		{"embeddings", "\u202a\u202b\u202d", `"\u202a\u202b\u202d"`},
		{"isolates", "\u2066\u2067\u2068iso\u2069", `"\u2066\u2067\u2068iso\u2069"`},
		{"marks", "\u200e\u200f\u061c", `"\u200e\u200f\u061c"`},
		{"not UTF-8", "a\xc2\x9b\xffb", `"a\u009b\ufffdb"`},
		{"at the ends", "\u009b", `"\u009b"`},
	} {
		for _, indent := range []string{"", "  "} {
			var b strings.Builder
			v := map[string][]string{tc.in: {tc.in}}
			if err := JSON(&b, v, indent); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if n := strings.Count(out, tc.want); n != 2 {
				t.Errorf("%s: JSON(%q) = %q, want %s as key and value", tc.name, v, out, tc.want)
			}
			for _, r := range out {
				if r >= 0x80 && r < 0xa0 || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Bidi_Control, r) {
					t.Errorf("%s: JSON wrote %U raw: %q", tc.name, r, out)
				}
			}
			var got map[string][]string
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%s: %q does not decode: %v", tc.name, out, err)
			}
			in := strings.ToValidUTF8(tc.in, "\ufffd")
			if len(got) != 1 || len(got[in]) != 1 || got[in][0] != in {
				t.Errorf("%s: JSON decodes to %q, want %q", tc.name, got, in)
			}
		}
	}
}

// TestTermEscapeNoCopy: JSON with nothing to escape is written as
// encoding/json wrote it, not copied.
func TestTermEscapeNoCopy(t *testing.T) {
	p := []byte(`{"a":"ünï 日本 \u001b"}`)
	if got := termEscape(p); &got[0] != &p[0] {
		t.Error("termEscape copied a text with nothing to escape")
	}
	if !utf8.Valid(termEscape([]byte("\"\u009b\""))) {
		t.Error("termEscape wrote invalid UTF-8")
	}
	if n := testing.AllocsPerRun(100, func() { termEscape(p) }); n != 0 {
		t.Errorf("termEscape of a plain text: %v allocations, want 0", n)
	}
}
