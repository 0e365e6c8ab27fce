package logfeed

import "bytes"

// zerolog, which encodes the OCSF lines and the ECS lines other than a
// process's, writes U+2028, U+2029 and the C1 controls (U+0080 to U+009F)
// as themselves. JSON allows that, but a collector that splits text at
// Unicode line breaks (Python's str.splitlines at U+0085, U+2028 and
// U+2029; JavaScript before ES2019 at the last two) cuts such a line in
// two, and a user chooses the texts that hold them (its executable's path,
// its arguments). internal/jsonx escapes them in the lines the log feed
// encodes itself; escapeLineBreaks does it to a line zerolog encoded.
//
// The rewrite needs no JSON parser: in a JSON text a byte of 0x80 or more
// can stand only inside a string, where \uXXXX means the character
// itself, and never right after a backslash (an escape is ASCII). In
// UTF-8, 0xC2 and 0xE2 are only ever the first byte of a character, so
// C2 80..C2 9F and E2 80 A8, E2 80 A9 are those characters and nothing
// else, even in a line that also holds bytes that are not UTF-8 (which a
// decoder reads one at a time, never taking a 0xC2 or 0xE2 with them).

// escapeLineBreaks returns the JSON line p with each U+2028, U+2029 and C1
// control written as its \uXXXX escape, appended to dst. When p holds none
// (the line of almost every event) it returns p itself, neither copied nor
// allocating: the caller must not assume the result is in dst. Two
// bytes.IndexByte searches, for 0xC2 and 0xE2, find that out (two vector
// scans: about 45 ns on a line of 1.5 KB of ASCII).
func escapeLineBreaks(dst, p []byte) []byte {
	c1, ls := indexC1(p, 0), indexLS(p, 0)
	if c1 < 0 && ls < 0 {
		return p
	}
	const hex = "0123456789abcdef"
	start := 0
	// Neither search can find a byte of the other's sequence (80..9F,
	// A8 and A9 are not 0xC2 or 0xE2), so whichever comes later stays
	// valid when the earlier is written.
	for c1 >= 0 || ls >= 0 {
		if ls < 0 || c1 >= 0 && c1 < ls {
			// C2 xx is U+00xx.
			dst = append(dst, p[start:c1]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[p[c1+1]>>4], hex[p[c1+1]&15])
			start = c1 + 2
			c1 = indexC1(p, start)
		} else {
			// E2 80 A8 is U+2028, E2 80 A9 U+2029.
			dst = append(dst, p[start:ls]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[p[ls+2]&15])
			start = ls + 3
			ls = indexLS(p, start)
		}
	}
	return append(dst, p[start:]...)
}

// indexC1 returns the index of the first C1 control (C2 80 to C2 9F) in p
// at or after from, or -1.
func indexC1(p []byte, from int) int {
	for from < len(p) {
		i := bytes.IndexByte(p[from:], 0xc2)
		if i < 0 {
			return -1
		}
		i += from
		if i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f {
			return i
		}
		from = i + 1
	}
	return -1
}

// indexLS returns the index of the first U+2028 or U+2029 (E2 80 A8,
// E2 80 A9) in p at or after from, or -1.
func indexLS(p []byte, from int) int {
	for from < len(p) {
		i := bytes.IndexByte(p[from:], 0xe2)
		if i < 0 {
			return -1
		}
		i += from
		if i+2 < len(p) && p[i+1] == 0x80 && p[i+2]|1 == 0xa9 {
			return i
		}
		from = i + 1
	}
	return -1
}
