package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestAppendJSONStringLineBreaks: the C1 controls, U+2028 and U+2029 are
// written as \uXXXX escapes wherever they stand (after a plain run of a
// word or more, among other characters of two and three bytes, next to
// bytes that are not UTF-8), their neighbours U+00A0, U+2027 and U+202F
// as themselves: a collector splitting at Unicode line breaks must see a
// process's line whole.
func TestAppendJSONStringLineBreaks(t *testing.T) {
	tests := []struct {
		in, want string
		valid    bool
	}{
		{"\u2028", `"\u2028"`, true},
		{"\u2029", `"\u2029"`, true},
		{"\u0080", `"\u0080"`, true},
		{"\u0085", `"\u0085"`, true},
		{"\u009b31m", `"\u009b31m"`, true},
		{"\u009f", `"\u009f"`, true},
		{"/tmp/\u2028\u2029", `"/tmp/\u2028\u2029"`, true},
		{"12345678\u2028", `"12345678\u2028"`, true},
		{"1234567\u0085", `"1234567\u0085"`, true},
		{"x\u0085{\"forged\":1}", `"x\u0085{\"forged\":1}"`, true},
		{"é\u2028€\u0085𝄞\u2029", `"é\u2028€\u0085𝄞\u2029"`, true},
		{"\u00a0\u2027\u202f\u00c2", "\"\u00a0\u2027\u202f\u00c2\"", true},
		{"rlo\u202eevil\u2066", `"rlo\u202eevil\u2066"`, true},
		{"\x7f\u0080\n", `"\u007f\u0080\u000a"`, true},
		{"\xff\u2028\xc2", `"\ufffd\u2028\ufffd"`, false},
		{"\xe2\x80\u0085", `"\ufffd\ufffd\u0085"`, false},
		{"\xe2\x80", `"\ufffd\ufffd"`, false}, // U+2028 cut: not one
		{strings.Repeat("x", 40) + "\u2029" + strings.Repeat("y", 9), `"` + strings.Repeat("x", 40) + `\u2029` + strings.Repeat("y", 9) + `"`, true},
	}
	for _, tt := range tests {
		got, valid := appendJSONStringOK(nil, []byte(tt.in))
		if string(got) != tt.want || valid != tt.valid {
			t.Errorf("appendJSONStringOK(%q) = %s, %v, want %s, %v", tt.in, got, valid, tt.want, tt.valid)
		}
	}
	for r := rune(0x80); r <= 0x9f; r++ {
		s := "abc" + string(r)
		if got, want := string(appendJSONString(nil, []byte(s))), fmt.Sprintf(`"abc\u%04x"`, r); got != want {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestAppendJSONLineBreaks encodes an exec whose every text holds a line
// break: the line holds none raw, and decodes to the texts given.
func TestAppendJSONLineBreaks(t *testing.T) {
	ev := Event{Kind: Exec, Mechanism: EBPF, Pid: 3, Token: testTok, Comm: comm("a\u2028b"),
		Exe: "/tmp/\u2028\u2029", Argv: []string{"x\u0085y", "\u009b"},
		Exec:   ExecInfo{Cwd: "/home/\u2029", Cgroup: "/\u0080"},
		Parent: &Desc{Comm: comm("p\u0085"), Exe: "/p\u2028"}}
	line := AppendJSON(nil, &ev)
	for _, seq := range []string{"\u2028", "\u2029", "\u0080", "\u0085", "\u009b"} {
		if bytes.Contains(line, []byte(seq)) {
			t.Errorf("AppendJSON = %s: holds %q raw", line, seq)
		}
	}
	var v struct {
		Comm, Exe string
		Argv      []string
		Cwd       string `json:"working_directory"`
		Cgroup    string
		Parent    struct{ Comm, Exe string }
	}
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatalf("AppendJSON = %s: %v", line, err)
	}
	got := []string{v.Comm, v.Exe, strings.Join(v.Argv, " "), v.Cwd, v.Cgroup, v.Parent.Comm, v.Parent.Exe}
	want := []string{"a\u2028b", ev.Exe, "x\u0085y \u009b", ev.Exec.Cwd, ev.Exec.Cgroup, "p\u0085", "/p\u2028"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("AppendJSON = %s: reads %q, want %q", line, got, want)
			break
		}
	}
}

// BenchmarkAppendJSONStringUTF8 is appendJSONString on a text of mostly
// two- and three-byte characters, where every character is checked for
// the escaped ones.
func BenchmarkAppendJSONStringUTF8(b *testing.B) {
	s := []byte(strings.Repeat("/home/jürgen/Документы/日本語/é€ ", 40))
	buf := make([]byte, 0, 8192)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendJSONString(buf[:0], s)
	}
}
