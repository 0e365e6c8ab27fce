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
// more.
func special(w uint64) bool {
	lt20 := (w - 0x20*ones) & ^w & highs
	quote := ((w ^ '"'*ones) - ones) & ^(w ^ '"'*ones) & highs
	bs := ((w ^ '\\'*ones) - ones) & ^(w ^ '\\'*ones) & highs
	del := ((w ^ 0x7f*ones) - ones) & ^(w ^ 0x7f*ones) & highs
	return (lt20 | quote | bs | del | w&highs) != 0
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
	start, i := 0, 0
	for i < len(s) {
		if i+8 <= len(s) {
			w := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
			if !special(w) {
				i += 8
				continue
			}
		}
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
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
