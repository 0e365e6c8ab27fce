package daemon

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

func TestPrivBounds(t *testing.T) {
	for _, tt := range []struct {
		name, status string
		nnp          bool
		bnd          uint64
		err          bool
	}{
		{"free", "Name:\tsh\nNoNewPrivs:\t0\nCapBnd:\t000001ffffffffff\n", false, 0x1ffffffffff, false},
		{"no_new_privs", "CapBnd:\t000001ffffffffff\nNoNewPrivs:\t1\n", true, 0x1ffffffffff, false},
		{"narrow bounding set", "NoNewPrivs:\t0\nCapBnd:\t0000000000000020\n", false, 0x20, false},
		{"no NoNewPrivs line", "CapBnd:\t000001ffffffffff\n", false, 0, true},
		{"no CapBnd line", "NoNewPrivs:\t1\n", false, 0, true},
		{"CapBnd not hex", "NoNewPrivs:\t0\nCapBnd:\tall\n", false, 0, true},
		{"CapBnd over 64 bits", "NoNewPrivs:\t0\nCapBnd:\t1ffffffffffffffff\n", false, 0, true},
		{"empty", "", false, 0, true},
	} {
		nnp, bnd, err := privBounds([]byte(tt.status))
		if (err != nil) != tt.err || err == nil && (nnp != tt.nnp || bnd != tt.bnd) {
			t.Errorf("%s: privBounds = %v, %#x, %v; want %v, %#x, error %v", tt.name, nnp, bnd, err, tt.nnp, tt.bnd, tt.err)
		}
	}
	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if _, bnd, err := privBounds(own); err != nil || bnd != ownCapBnd() {
		t.Errorf("privBounds of /proc/self/status = %#x, %v; want the own bounding set %#x", bnd, err, ownCapBnd())
	}
}

// FuzzPrivBounds: any status text is parsed or refused, never trusted
// half: a NoNewPrivs read as set is a line that says 1, and the bounding
// set read is the first CapBnd line's hex digits.
func FuzzPrivBounds(f *testing.F) {
	f.Add([]byte("NoNewPrivs:\t0\nCapBnd:\t000001ffffffffff\n"))
	f.Add([]byte("NoNewPrivs:\t1\nCapBnd:\t0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		nnp, bnd, err := privBounds(b)
		if err != nil {
			return
		}
		if nnp && !strings.Contains("\n"+string(b), "\nNoNewPrivs:") {
			t.Fatalf("no_new_privs read as set from %q", b)
		}
		line, _ := procfs.LineValue(b, "CapBnd:")
		digits := strings.TrimLeft(strings.ToLower(string(line)), "0")
		if digits != strings.TrimLeft(strconv.FormatUint(bnd, 16), "0") {
			t.Fatalf("CapBnd %#x read from the line %q", bnd, line)
		}
	})
}
