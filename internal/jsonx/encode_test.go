package jsonx

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// referenceEscape is the byte-at-a-time form of AppendEscaped.
func referenceEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || 0x7f <= r && r <= 0x9f:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&15])
		case r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// checkString checks AppendString(s) against the reference, and that it
// is valid JSON decoding to s with each invalid byte as U+FFFD.
func checkString(t *testing.T, s string) {
	t.Helper()
	got := AppendString([]byte("x"), s)
	if want := `x"` + referenceEscape(s) + `"`; string(got) != want {
		t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
	}
	if got := AppendBytes(nil, []byte(s)); string(got) != string(AppendString(nil, s)) {
		t.Fatalf("AppendBytes(%q) = %q, not AppendString's", s, got)
	}
	if !utf8.Valid(got) {
		t.Fatalf("AppendString(%q) = %q: not valid UTF-8", s, got)
	}
	var back string
	if err := json.Unmarshal(got[1:], &back); err != nil {
		t.Fatalf("AppendString(%q) = %q: %v", s, got, err)
	}
	if want := string([]rune(s)); back != want {
		t.Fatalf("AppendString(%q) decodes to %q, want %q", s, back, want)
	}
	if esc, ok := AppendEscapedUTF8(nil, s); string(esc) != string(got[2:len(got)-1]) || ok != utf8.ValidString(s) {
		t.Fatalf("AppendEscapedUTF8(%q) = %q, %v; want AppendEscaped's %q, %v", s, esc, ok, got[2:len(got)-1], utf8.ValidString(s))
	}
	if at := rawBreak(got); at >= 0 {
		t.Fatalf("AppendString(%q) = %q: a raw line break or C1 control at byte %d", s, got, at)
	}
}

// rawBreak returns the index in b of the first U+2028, U+2029, C1 control
// (U+0080 to U+009F) or bidirectional control written as itself, -1 when
// none.
func rawBreak(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if size > 1 && (r <= 0x9f || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Bidi_Control, r)) {
			return i
		}
		i += size
	}
	return -1
}

// TestBidi: Bidi is unicode.Bidi_Control, and Escaped adds LineBreak.
func TestBidi(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := Bidi(r), unicode.Is(unicode.Bidi_Control, r); got != want {
			t.Fatalf("Bidi(%U) = %v, want %v", r, got, want)
		}
		if got, want := Escaped(r), LineBreak(r) || Bidi(r); got != want {
			t.Fatalf("Escaped(%U) = %v, want %v", r, got, want)
		}
	}
}

// TestAppendStringLineBreaks: U+2028, U+2029, the C1 controls and the
// bidirectional controls are escaped wherever they stand, among ASCII,
// other characters of two and three bytes (U+00A0 and U+2027, U+202F
// around them), and bytes that are not UTF-8, which are still replaced
// and reported.
func TestAppendStringLineBreaks(t *testing.T) {
	tests := []struct {
		in, want string
		valid    bool
	}{
		{"\u2028", `\u2028`, true},
		{"\u2029", `\u2029`, true},
		{"\u0080", `\u0080`, true},
		{"\u0085", `\u0085`, true},
		{"\u009b", `\u009b`, true},
		{"\u009f", `\u009f`, true},
		{"a\u2028b\u2029c", `a\u2028b\u2029c`, true},
		{"--password=x\u0085{\"forged\":1}", `--password=x\u0085{\"forged\":1}`, true},
		{"\u009b31mred", `\u009b31mred`, true},
		{"12345678\u2028", `12345678\u2028`, true},
		{"1234567\u2029", `1234567\u2029`, true},
		{"123456\u0085", `123456\u0085`, true},
		{"\u2028\u2028\u0085\u0085", `\u2028\u2028\u0085\u0085`, true},
		{"é\u2028ü\u0085✓\u2029🎉", `é\u2028ü\u0085✓\u2029🎉`, true},
		// Bidirectional controls.
		{"rlo\u202eevil", `rlo\u202eevil`, true},
		{"\u061c\u200e\u200f\u202a\u2066\u2069", `\u061c\u200e\u200f\u202a\u2066\u2069`, true},
		// Neighbours written as themselves.
		{"\u00a0\u2027\u202f\u00c2\u0100\u2065\u206a\u061b", "\u00a0\u2027\u202f\u00c2\u0100\u2065\u206a\u061b", true},
		{"\u007f\u0080", `\u007f\u0080`, true},
		// Bytes that are not UTF-8 next to them.
		{"\xff\u2028\xc2", `\ufffd\u2028\ufffd`, false},
		{"\xe2\x80\u0085", `\ufffd\ufffd\u0085`, false},
		{"\xc2\xc2\x85", `\ufffd\u0085`, false},
		{"\xe2\x80", `\ufffd\ufffd`, false}, // U+2028 cut: not one
		{strings.Repeat("x", 100) + "\u2029" + strings.Repeat("y", 9), strings.Repeat("x", 100) + `\u2029` + strings.Repeat("y", 9), true},
	}
	for _, tt := range tests {
		got, valid := AppendEscapedUTF8(nil, tt.in)
		if string(got) != tt.want || valid != tt.valid {
			t.Errorf("AppendEscapedUTF8(%q) = %s, %v, want %s, %v", tt.in, got, valid, tt.want, tt.valid)
		}
		checkString(t, tt.in)
	}
	// Every C1 control at every offset within a word.
	for r := rune(0x80); r <= 0x9f; r++ {
		for off := range 9 {
			s := strings.Repeat("a", off) + string(r) + "bcdefghij"
			want := strings.Repeat("a", off) + fmt.Sprintf(`\u%04x`, r) + "bcdefghij"
			if got := AppendEscaped(nil, s); string(got) != want {
				t.Errorf("AppendEscaped(%q) = %s, want %s", s, got, want)
			}
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "a", "plain ascii of more than eight bytes",
		`quote " here`, `back\slash`, "ctl \x00\x01\x1f\x7f", "\b\f\n\r\t",
		"héllo wörld ✓ 🎉", "bad \xff byte", "cut \xe2\x82", "\xe2\x82 start",
		"12345678\"2345678", "1234567\n", "surrogate \xed\xa0\x80",
		strings.Repeat("a", 4096) + "\x00" + strings.Repeat("é", 100),
	} {
		checkString(t, s)
	}
	// Every byte value, at every offset within a word.
	for c := range 256 {
		for off := range 9 {
			checkString(t, strings.Repeat("a", off)+string(rune(c))[:1]+strings.Repeat("b", 9))
		}
	}
}

// TestAppendEscapedPieces: escaping a joined string piece by piece gives
// the escaped whole when pieces are joined at a plain byte.
func TestAppendEscapedPieces(t *testing.T) {
	pieces := []string{"a\xe2", "\x82b", "\"x\"", "é"}
	var b []byte
	for i, p := range pieces {
		if i > 0 {
			b = append(b, ' ')
		}
		b = AppendEscaped(b, p)
	}
	if want := referenceEscape(strings.Join(pieces, " ")); string(b) != want {
		t.Errorf("pieces escaped to %q, want %q", b, want)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "plain ascii, long enough", "a\"b\\c\x00", "a\"b\\c\x00\x7f",
		"héllo \xff", "héllo \xff\xe2\x82", strings.Repeat("x", 17) + "\x1f", "a\u2028b\u2029\u0085\u009b",
		"\xc2\u0080\xe2\x80\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkString(t, s) // rawBreak among its checks
		// Pieces cut anywhere: never a raw line break either, even
		// where a cut splits one.
		for _, cut := range []int{len(s) / 3, len(s) / 2} {
			b := AppendEscaped(nil, s[:cut])
			b = AppendEscaped(b, s[cut:])
			if at := rawBreak(b); at >= 0 {
				t.Fatalf("AppendEscaped of %q cut at %d = %q: a raw line break or C1 control at byte %d", s, cut, b, at)
			}
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	for _, tt := range []struct{ name, s string }{
		{"ascii-127", strings.Repeat("abcdefgh", 16)[:127]},
		{"escapes-127", strings.Repeat("ab\"d\\fg\n", 16)[:127]},
		{"utf8-127", strings.Repeat("héllo ", 25)[:127]},
		{"ascii-64", strings.Repeat("--option=value-", 5)[:64]},
		{"ascii-15", "--option=value-"},
		{"ascii-61", strings.Repeat("--option=value-", 5)[:61]},
		{"ascii-4k", strings.Repeat("--option=value-", 300)[:4096]},
	} {
		b.Run(tt.name, func(b *testing.B) {
			buf := make([]byte, 0, 1024)
			b.SetBytes(int64(len(tt.s)))
			for b.Loop() {
				buf = AppendString(buf[:0], tt.s)
			}
		})
	}
}

// TestSpecial: special flags a word exactly when one of its bytes is not
// plain, for every byte value at every position among plain neighbours
// of every kind, and for words of two non-plain bytes.
func TestSpecial(t *testing.T) {
	isPlain := func(c byte) bool { return c < utf8.RuneSelf && plain[c] }
	word := func(p [8]byte) uint64 { return binary.LittleEndian.Uint64(p[:]) }
	for fill := range 256 {
		if !isPlain(byte(fill)) {
			continue
		}
		for c := range 256 {
			for pos := range 8 {
				var p [8]byte
				for i := range p {
					p[i] = byte(fill)
				}
				p[pos] = byte(c)
				if got, want := special(word(p)), !isPlain(byte(c)); got != want {
					t.Fatalf("special(% x) = %v, want %v", p, got, want)
				}
			}
		}
	}
	for c := range 256 {
		for d := range 256 {
			p := [8]byte{'a', byte(c), 'b', 'c', byte(d), 'e', 'f', 'g'}
			if got, want := special(word(p)), !isPlain(byte(c)) || !isPlain(byte(d)); got != want {
				t.Fatalf("special(% x) = %v, want %v", p, got, want)
			}
		}
	}
}

// plainPrefixRef is PlainPrefix byte by byte.
func plainPrefixRef(p []byte) int {
	for i, c := range p {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return i
		}
	}
	return len(p)
}

func TestPlainPrefix(t *testing.T) {
	long := strings.Repeat("abcdefgh", 40)
	for _, s := range []string{"", "a", "abcdefg", "abcdefgh", long, long + "\"", long + "x\\", "\x7f", "1234567\x1f",
		"12345678\x80", "é", "tab\t", long + "\xff" + long, "~~~~~~~~ ", "        \x00"} {
		if got, want := PlainPrefix([]byte(s)), plainPrefixRef([]byte(s)); got != want {
			t.Errorf("PlainPrefix(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzPlainPrefix(f *testing.F) {
	f.Add([]byte("plain then \"quoted\""))
	f.Add([]byte("12345678\x7f12345678"))
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := PlainPrefix(p), plainPrefixRef(p); got != want {
			t.Fatalf("PlainPrefix(%q) = %d, want %d", p, got, want)
		}
	})
}
