package procfs

import "testing"

func TestParseBootOffset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"monotonic           0         0\nboottime       100000         0\n", 100000 * 100},
		{"monotonic 5 0\nboottime -100 0\n", -100 * 100},
		{"boottime 1 999999999\n", 199},    // 1.999999999 s: 199 ticks
		{"7 2 500000000\n", 250},           // by clock number (CLOCK_BOOTTIME)
		{"monotonic 3 0\n", 0},             // no boottime line
		{"boottime x 0\n", 0},              // malformed
		{"boottime 1 1000000000\n", 0},     // nanoseconds out of range
		{"boottime 99999999999999 0\n", 0}, // beyond any clock
		{"", 0},
	} {
		if got := ParseBootOffset([]byte(tc.in)); got != tc.want {
			t.Errorf("ParseBootOffset(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzParseBootOffset: any file gives an offset within the bounds
// ParseBootOffset keeps, never a panic.
func FuzzParseBootOffset(f *testing.F) {
	f.Add([]byte("monotonic 0 0\nboottime 100000 0\n"))
	f.Add([]byte("7 -5 999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := ParseBootOffset(b); got < -(1<<40)*100-100 || got > (1<<40)*100+100 {
			t.Fatalf("ParseBootOffset(%q) = %d, out of bounds", b, got)
		}
	})
}
