package logfeed

import "bytes"

// zerolog, which encodes the OCSF lines and the ECS lines other than a
// process's, writes U+2028, U+2029, the C1 controls (U+0080 to U+009F) and
// the bidirectional controls as themselves. JSON allows that, but a
// collector that splits text at Unicode line breaks (Python's
// str.splitlines at U+0085, U+2028 and U+2029; JavaScript before ES2019 at
// the last two) cuts such a line in two, a terminal showing the line may
// show a user's text reversed (U+202E), and a user chooses the texts that
// hold them (its executable's path, its arguments). internal/jsonx escapes them in the lines the log feed
// encodes itself; escapeLineBreaks does it to a line zerolog encoded.
//
// The rewrite needs no JSON parser: in a JSON text a byte of 0x80 or more
// can stand only inside a string, where \uXXXX means the character
// itself, and never right after a backslash (an escape is ASCII). In
// UTF-8, 0xC2 and 0xE2 are only ever the first byte of a character, so
// C2 80..C2 9F and E2 80 A8, E2 80 A9 are those characters and nothing
// else, even in a line that also holds bytes that are not UTF-8 (which a
// decoder reads one at a time, never taking a 0xC2 or 0xE2 with them).

// escapeLineBreaks returns the JSON line p with each U+2028, U+2029, C1
// control and bidirectional control (jsonx.Escaped) written as its \uXXXX
// escape, appended to dst. When p holds none (the line of almost every
// event) it returns p itself, neither copied nor allocating: the caller
// must not assume the result is in dst. Three bytes.IndexByte searches,
// for 0xC2, 0xE2 and 0xD8, find that out (vector scans: about 60 ns on a
// line of 1.5 KB of ASCII).
func escapeLineBreaks(dst, p []byte) []byte {
	c1, ls, alm := indexC1(p, 0), indexLS(p, 0), indexALM(p, 0)
	if c1 < 0 && ls < 0 && alm < 0 {
		return p
	}
	const hex = "0123456789abcdef"
	start := 0
	// No search can find a byte of another's sequence (80..9F and the
	// third bytes are not 0xC2, 0xE2 or 0xD8), so whichever comes later
	// stays valid when the earlier is written.
	for c1 >= 0 || ls >= 0 || alm >= 0 {
		switch first(c1, ls, alm) {
		case c1:
			// C2 xx is U+00xx.
			dst = append(dst, p[start:c1]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[p[c1+1]>>4], hex[p[c1+1]&15])
			start = c1 + 2
			c1 = indexC1(p, start)
		case ls:
			// E2 xx yy is U+2000 + (xx&0x3f)<<6 + (yy&0x3f).
			r := 0x2000 | rune(p[ls+1]&0x3f)<<6 | rune(p[ls+2]&0x3f)
			dst = append(dst, p[start:ls]...)
			dst = append(dst, '\\', 'u', hex[r>>12], hex[r>>8&15], hex[r>>4&15], hex[r&15])
			start = ls + 3
			ls = indexLS(p, start)
		default:
			// D8 9C is U+061C.
			dst = append(dst, p[start:alm]...)
			dst = append(dst, `\u061c`...)
			start = alm + 2
			alm = indexALM(p, start)
		}
	}
	return append(dst, p[start:]...)
}

// first returns the least of the indexes that are not -1 (one is not).
func first(idx ...int) int {
	m := -1
	for _, i := range idx {
		if i >= 0 && (m < 0 || i < m) {
			m = i
		}
	}
	return m
}

// indexC1 returns the index of the first C1 control (C2 80 to C2 9F) in p
// at or after from, or -1.
func indexC1(p []byte, from int) int { return indexTwo(p, from, 0xc2, 0x80, 0x9f) }

// indexALM returns the index of the first U+061C (D8 9C) in p at or after
// from, or -1.
func indexALM(p []byte, from int) int { return indexTwo(p, from, 0xd8, 0x9c, 0x9c) }

// indexTwo returns the index of the first two-byte sequence lead, then a
// byte from lo to hi, in p at or after from, or -1.
func indexTwo(p []byte, from int, lead, lo, hi byte) int {
	for from < len(p) {
		i := bytes.IndexByte(p[from:], lead)
		if i < 0 {
			return -1
		}
		i += from
		if i+1 < len(p) && p[i+1] >= lo && p[i+1] <= hi {
			return i
		}
		from = i + 1
	}
	return -1
}

// indexLS returns the index of the first escaped character of three bytes
// (jsonx.Escaped) in p at or after from, or -1: U+2028, U+2029 (E2 80 A8,
// E2 80 A9), U+200E, U+200F (E2 80 8E, 8F), U+202A to U+202E (E2 80 AA to
// AE) and U+2066 to U+2069 (E2 81 A6 to A9).
func indexLS(p []byte, from int) int {
	for from < len(p) {
		i := bytes.IndexByte(p[from:], 0xe2)
		if i < 0 {
			return -1
		}
		i += from
		if i+2 < len(p) {
			switch b, c := p[i+1], p[i+2]; {
			case b == 0x80 && (c|1 == 0xa9 || c|1 == 0x8f || c-0xaa < 5),
				b == 0x81 && c-0xa6 < 4:
				return i
			}
		}
		from = i + 1
	}
	return -1
}
