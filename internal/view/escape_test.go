package view

import (
	"bytes"
	"errors"
	"testing"
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
		{"\xc2\xc2\x9b", "\xc2" + `\xc2\x9b`},
		{"lone \x9b and \xff", "lone \x9b and \xff"},
		{"ends in \xc2", "ends in \xc2"},
		{"", ""},
	} {
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
