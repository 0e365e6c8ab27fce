package events

import "strings"

// SplitArgs splits NUL-terminated arguments (an argv area, as exec
// received it) into one string and its substrings. The last one lacks its
// NUL when the capture was cut; empty arguments are kept.
func SplitArgs(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return SplitArgString(string(b))
}

// SplitArgString is SplitArgs on an argv area already held in a string:
// the arguments are its substrings, and only their slice is allocated.
func SplitArgString(s string) []string {
	return SplitArgStringInto(nil, s)
}

// SplitArgStringInto is SplitArgString appending to dst[:0]: with room in
// dst, nothing is allocated.
func SplitArgStringInto(dst []string, s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\x00")
	n := strings.Count(s, "\x00") + 1
	argv := dst[:0]
	if cap(argv) < n {
		argv = make([]string, 0, n)
	}
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(argv, s)
		}
		argv = append(argv, s[:i])
		s = s[i+1:]
	}
}
