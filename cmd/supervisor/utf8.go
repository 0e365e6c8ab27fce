package main

import "unicode/utf8"

// decodeRune returns the rune at the start of b and its length, or -1 when
// b does not start with valid UTF-8.
func decodeRune(b []byte) (rune, int) {
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n <= 1 {
		return -1, 1
	}
	return r, n
}
