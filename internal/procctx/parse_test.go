package procctx

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
)

func TestParseStatus(t *testing.T) {
	full := "Name:\tsleep\nUid:\t1000\t1001\t1002\t1003\nGid:\t10\t11\t12\t13\nGroups:\t4 24 27 \nNSpid:\t812\t3\n"
	var many string
	for i := range 20 {
		many += " " + string(rune('1'+i%9))
	}
	tests := []struct {
		name    string
		in      string
		ok      bool
		uid     [3]uint32
		gid     [3]uint32
		ngroups int
		nspid   int32
	}{
		{"full", full, true, [3]uint32{1000, 1001, 1002}, [3]uint32{10, 11, 12}, 3, 3},
		{"no groups, no nspid", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n", true, [3]uint32{}, [3]uint32{}, 0, 0},
		{"more groups than kept", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:" + many + "\n", true, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 20, 0},
		{"no gid", "Uid:\t1\t1\t1\t1\n", false, [3]uint32{}, [3]uint32{}, 0, 0},
		{"short uid", "Uid:\t1\t1\nGid:\t1\t1\t1\t1\n", false, [3]uint32{}, [3]uint32{}, 0, 0},
		{"bad group", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\tx\n", false, [3]uint32{}, [3]uint32{}, 0, 0},
		{"bad nspid", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nNSpid:\t0\n", false, [3]uint32{}, [3]uint32{}, 0, 0},
		{"uid overflow", "Uid:\t4294967296\t1\t1\t1\nGid:\t1\t1\t1\t1\n", false, [3]uint32{}, [3]uint32{}, 0, 0},
	}
	for _, tt := range tests {
		var c events.Context
		err := parseStatus([]byte(tt.in), &c)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err %v, want ok %v", tt.name, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if [3]uint32{c.UID, c.EUID, c.SUID} != tt.uid || [3]uint32{c.GID, c.EGID, c.SGID} != tt.gid || c.NGroups != tt.ngroups || c.NSPid != tt.nspid {
			t.Errorf("%s: %+v", tt.name, c)
		}
	}
}

func TestParseSmall(t *testing.T) {
	if ino, ok := parseNSLink("pid:[4026531836]", "pid"); !ok || ino != 4026531836 {
		t.Errorf("parseNSLink = %d, %v", ino, ok)
	}
	for _, bad := range []string{"net:[1]", "pid:[]", "pid:[12", "pid:[x]", ""} {
		if _, ok := parseNSLink(bad, "pid"); ok {
			t.Errorf("parseNSLink(%q) ok", bad)
		}
	}
	if v, ok := parseID([]byte("4294967295")); !ok || v != events.UnsetID {
		t.Errorf("parseID(unset) = %d, %v", v, ok)
	}
	if _, ok := parseID([]byte("-1")); ok {
		t.Error("parseID(-1) ok")
	}
	if maj, min := ttyDev(34816); maj != 136 || min != 0 {
		t.Errorf("ttyDev(pts/0) = %d:%d", maj, min)
	}
	if maj, min := ttyDev(34816 | 5 | 3<<20); maj != 136 || min != 5|3<<8 {
		t.Errorf("ttyDev(high minor) = %d:%d", maj, min)
	}
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a\x00", []string{"a"}},
		{"a\x00\x00b c\x00", []string{"a", "", "b c"}},
		{"a\x00bc", []string{"a", "bc"}}, // cut inside the last argument
	}
	for _, tt := range tests {
		if got := events.SplitArgs([]byte(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Uid:\t1000\t1001\t1002\t1003\nGid:\t10\t11\t12\t13\nGroups:\t4 24 27 \nNSpid:\t812\t3\n"))
	f.Add([]byte("Groups:\nUid:\nGid:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c events.Context
		if parseStatus(b, &c) == nil && c.NGroups < 0 {
			t.Fatalf("negative group count from %q", b)
		}
		// What the small parsers accept is decimal digits, the number
		// read (less leading zeros).
		if v, ok := parseNSLink(string(b), "pid"); ok {
			digits, _ := strings.CutSuffix(strings.TrimPrefix(string(b), "pid:["), "]")
			if !sameNumber(digits, uint64(v)) {
				t.Fatalf("parseNSLink(%q) = %d", b, v)
			}
		}
		if v, ok := parseID(b); ok && !sameNumber(string(bytes.TrimSpace(b)), uint64(v)) {
			t.Fatalf("parseID(%q) = %d", b, v)
		}
		// Each NUL ends an argument: joined back with NULs, the arguments
		// are the input, less a last NUL.
		if args := events.SplitArgs(b); len(b) > 0 {
			if got, want := strings.Join(args, "\x00"), strings.TrimSuffix(string(b), "\x00"); got != want {
				t.Fatalf("SplitArgs(%q) = %q, joined %q", b, args, got)
			}
		}
	})
}

// sameNumber reports whether digits, all decimal, are v written with any
// leading zeros.
func sameNumber(digits string, v uint64) bool {
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return false
	}
	return strings.TrimLeft(digits, "0") == strings.TrimLeft(strconv.FormatUint(v, 10), "0")
}
