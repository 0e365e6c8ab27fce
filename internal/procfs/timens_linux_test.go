package procfs

import "testing"

func TestParseBootOffset(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  int64
		exact bool
	}{
		{"monotonic           0         0\nboottime       100000         0\n", 100000 * 100, true},
		{"monotonic 5 0\nboottime -100 0\n", -100 * 100, true},
		{"boottime 1 999999999\n", 199, false},    // 1.999999999 s: 199 ticks and a part
		{"boottime 0 7000000\n", 0, false},        // 7 ms
		{"7 2 500000000\n", 250, true},            // by clock number (CLOCK_BOOTTIME)
		{"monotonic 3 0\n", 0, true},              // no boottime line
		{"boottime x 0\n", 0, false},              // malformed
		{"boottime 1 1000000000\n", 0, false},     // nanoseconds out of range
		{"boottime 99999999999999 0\n", 0, false}, // beyond any clock
		{"", 0, true},
	} {
		if got, exact := ParseBootOffset([]byte(tc.in)); got != tc.want || exact != tc.exact {
			t.Errorf("ParseBootOffset(%q) = %d, %v; want %d, %v", tc.in, got, exact, tc.want, tc.exact)
		}
	}
}

// FuzzParseBootOffset: any file gives an offset within the bounds
// ParseBootOffset keeps, never a panic.
func FuzzParseBootOffset(f *testing.F) {
	f.Add([]byte("monotonic 0 0\nboottime 100000 0\n"))
	f.Add([]byte("7 -5 999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, _ := ParseBootOffset(b); got < -(1<<40)*100-100 || got > (1<<40)*100+100 {
			t.Fatalf("ParseBootOffset(%q) = %d, out of bounds", b, got)
		}
	})
}
