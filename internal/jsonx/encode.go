package jsonx

import (
	"encoding/binary"
	"unicode/utf8"
	"unsafe"
)

// The encoding half: appenders for hand-written encoders of hot lines (the
// log feed's process events), which build a line in one pass into a reused
// buffer. A string is written as RFC 8259 asks: quoted, '"' and '\\'
// escaped, control characters as \b \f \n \r \t or \u00XX (DEL too), and every byte
// that is not part of valid UTF-8 replaced by \ufffd, so the output is
// always valid UTF-8 JSON. Runs of eight plain ASCII bytes are checked a
// word at a time.
//
// Controls and line breaks beyond ASCII are escaped too: the C1 controls
// U+0080 to U+009F as \u0080 to \u009f, and U+2028 and U+2029 as \u2028
// and \u2029 (as encoding/json writes those two). JSON allows them raw,
// but a reader that splits text at Unicode line breaks (Python's
// str.splitlines at U+0085, U+2028 and U+2029; JavaScript source before
// ES2019 at the last two) would cut a line holding one in two, so a user
// could make its own exec line unreadable there; and a C1 control such as
// U+009B (CSI) is read by some terminals as the escape sequence it is, as
// a C0 one would be. The check costs a comparison per character of two
// bytes or more, none on ASCII.

const hexDigits = "0123456789abcdef"

// plain[c] is true for an ASCII byte written as itself.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf-1; c++ { // DEL (0x7f) as \u007f
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special reports whether the 8 bytes of w hold one that is not plain
// ASCII: a control character (DEL too), '"', '\\' or a byte of 0x80 or
// more. Each term sets the high bit of a byte that is one of them (w
// itself those of 0x80 or more, w+1 also DEL, w-0x20 those under 0x20,
// the XORs minus one a '"' or '\\'); a carry or borrow between bytes
// can only start at a byte a term already flagged, so a false high bit
// never comes alone.
func special(w uint64) bool {
	return (w|(w+ones)|(w-0x20*ones)|((w^'"'*ones)-ones)|((w^'\\'*ones)-ones))&highs != 0
}

// word returns the 8 bytes of s at i, little-endian.
func word(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

// PlainPrefix returns how many bytes at the start of p are plain ASCII,
// written as themselves inside a JSON string: no control character, DEL,
// '"', '\\' or byte of 0x80 or more. It looks a word at a time, for
// encoders that copy plain runs whole and escape the rest their own way.
func PlainPrefix(p []byte) int {
	i := 0
	for len(p)-i >= 8 && !special(binary.LittleEndian.Uint64(p[i:])) {
		i += 8
	}
	for i < len(p) && p[i] < utf8.RuneSelf && plain[p[i]] {
		i++
	}
	return i
}

// AppendString appends s to b as a quoted JSON string.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendEscaped(b, s)
	return append(b, '"')
}

// AppendBytes appends p to b as a quoted JSON string, as AppendString.
func AppendBytes(b, p []byte) []byte {
	return AppendString(b, unsafe.String(unsafe.SliceData(p), len(p)))
}

// AppendEscaped appends s to b escaped as the inside of a JSON string,
// without the quotes: a string built from pieces is the concatenation of
// their escaped forms, when each piece is whole UTF-8 or cut at a byte
// that is not.
func AppendEscaped(b []byte, s string) []byte {
	b, _ = AppendEscapedUTF8(b, s)
	return b
}

// AppendEscapedUTF8 is AppendEscaped, and reports whether s is UTF-8: false
// when a byte was replaced by \ufffd, which a decoder reads as it reads a
// real U+FFFD. It costs what AppendEscaped costs.
func AppendEscapedUTF8(b []byte, s string) ([]byte, bool) {
	valid := true
	start, i := 0, 0
	for i < len(s) {
		for len(s)-i >= 8 && !special(word(s, i)) {
			i += 8
		}
		end := i + 8 // the word that needs work, a byte at a time
		if len(s)-i < 8 {
			// A tail shorter than a word: the last word of s holds it
			// (and bytes already seen); when that is plain, so is the
			// tail.
			if i == len(s) || len(s) >= 8 && !special(word(s, len(s)-8)) {
				break
			}
			end = len(s)
		}
		for i < end {
			c := s[i]
			if c < utf8.RuneSelf {
				if plain[c] {
					i++
					continue
				}
				b = append(b, s[start:i]...)
				switch c {
				case '"', '\\':
					b = append(b, '\\', c)
				case '\b':
					b = append(b, '\\', 'b')
				case '\f':
					b = append(b, '\\', 'f')
				case '\n':
					b = append(b, '\\', 'n')
				case '\r':
					b = append(b, '\\', 'r')
				case '\t':
					b = append(b, '\\', 't')
				default:
					b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
				}
				i++
				start = i
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if size == 1 || Escaped(r) {
				// A byte that is not UTF-8 (the only one-byte
				// result at c >= 0x80), or a character escaped.
				b = append(b, s[start:i]...)
				if size == 1 {
					b = append(b, `\ufffd`...)
					valid = false
				} else {
					b = append(b, '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
				}
				i += size
				start = i
				continue
			}
			i += size // may end past the word: the next one starts there
		}
	}
	return append(b, s[start:]...), valid
}

// LineBreak reports whether r is a C1 control (U+0080 to U+009F), U+2028
// or U+2029: a line break to a reader that splits at Unicode ones.
func LineBreak(r rune) bool {
	return uint32(r)-0x80 < 0x20 || r|1 == 0x2029
}

// Bidi reports whether r is a bidirectional control (U+061C, U+200E,
// U+200F, U+202A to U+202E, U+2066 to U+2069): U+202E shows what follows
// it reversed, so a user's argument could show another text on a
// terminal that reads the line.
func Bidi(r rune) bool {
	return r == 0x061c || r|1 == 0x200f || uint32(r)-0x202a < 5 || uint32(r)-0x2066 < 4
}

// Escaped reports whether r, a character of two bytes or more, is one
// written escaped: a line break (LineBreak) or a bidirectional control
// (Bidi). Encoders with their own escaping (internal/events, the CLI's
// JSON) ask it, so every encoder escapes the same characters.
func Escaped(r rune) bool { return LineBreak(r) || Bidi(r) }

// ValidCut reports whether s is UTF-8 but for the first bytes of one
// character at its end, where something cut it (the kernel's 15-byte
// process name, an argument vector cut at a bound): such a text is marked
// as cut, not as holding bytes that are not UTF-8.
func ValidCut(s string) bool {
	if utf8.ValidString(s) {
		return true
	}
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(s[i]) {
			return !utf8.FullRuneInString(s[i:]) && utf8.ValidString(s[:i])
		}
	}
	return false
}
