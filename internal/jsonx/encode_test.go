package jsonx

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
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
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&15])
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
		"héllo \xff", "héllo \xff\xe2\x82", strings.Repeat("x", 17) + "\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkString(t, s) })
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
