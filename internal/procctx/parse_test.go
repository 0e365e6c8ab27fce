package procctx

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
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
		groups  []uint32 // the kept ones
		nspid   int32
	}{
		{"full", full, true, [3]uint32{1000, 1001, 1002}, [3]uint32{10, 11, 12}, 3, []uint32{4, 24, 27}, 3},
		{"no groups, no nspid", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n", true, [3]uint32{}, [3]uint32{}, 0, nil, 0},
		{"more groups than kept", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:" + many + "\n", true, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 20,
			[]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7}, 0},
		{"no gid", "Uid:\t1\t1\t1\t1\n", false, [3]uint32{}, [3]uint32{}, 0, nil, 0},
		{"short uid", "Uid:\t1\t1\nGid:\t1\t1\t1\t1\n", false, [3]uint32{}, [3]uint32{}, 0, nil, 0},
		{"bad group", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\tx\n", false, [3]uint32{}, [3]uint32{}, 0, nil, 0},
		{"bad nspid", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nNSpid:\t0\n", false, [3]uint32{}, [3]uint32{}, 0, nil, 0},
		{"uid overflow", "Uid:\t4294967296\t1\t1\t1\nGid:\t1\t1\t1\t1\n", false, [3]uint32{}, [3]uint32{}, 0, nil, 0},
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
		if kept := c.Groups[:min(c.NGroups, events.MaxGroups)]; !slices.Equal(kept, tt.groups) {
			t.Errorf("%s: groups %v, want %v", tt.name, kept, tt.groups)
		}
	}
}

// checkStatus fails t unless c holds what the lines of status file b say,
// read here field by field: the first three ids of the Uid and Gid lines,
// the count and the kept values of the Groups line, the last NSpid.
func checkStatus(t *testing.T, b []byte, c *events.Context) {
	t.Helper()
	// fields parses the first n fields of a line (all for n < 0).
	fields := func(prefix string, n int) []uint64 {
		val, ok := procfs.LineValue(b, prefix)
		if !ok {
			return nil
		}
		var out []uint64
		for i, f := range bytes.Fields(val) {
			if i == n {
				break
			}
			v, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				t.Fatalf("parseStatus accepted %s %q in %q", prefix, f, b)
			}
			out = append(out, v)
		}
		return out
	}
	uids, gids := fields("Uid:", 3), fields("Gid:", 3)
	if len(uids) < 3 || len(gids) < 3 {
		t.Fatalf("parseStatus accepted %q: uids %v, gids %v", b, uids, gids)
	}
	got := []uint32{c.UID, c.EUID, c.SUID, c.GID, c.EGID, c.SGID}
	want := []uint32{uint32(uids[0]), uint32(uids[1]), uint32(uids[2]), uint32(gids[0]), uint32(gids[1]), uint32(gids[2])}
	if !slices.Equal(got, want) {
		t.Fatalf("parseStatus(%q) ids %v, want %v", b, got, want)
	}
	groups := fields("Groups:", -1)
	if c.NGroups != len(groups) {
		t.Fatalf("parseStatus(%q) counted %d groups, the line has %d", b, c.NGroups, len(groups))
	}
	for i := range min(len(groups), events.MaxGroups) {
		if uint64(c.Groups[i]) != groups[i] {
			t.Fatalf("parseStatus(%q) group %d = %d, want %d", b, i, c.Groups[i], groups[i])
		}
	}
	if val, ok := procfs.LineValue(b, "NSpid:"); ok {
		f := bytes.Fields(val)
		if len(f) == 0 {
			t.Fatalf("parseStatus accepted an empty NSpid line in %q", b)
		}
		if last, err := strconv.ParseInt(string(f[len(f)-1]), 10, 32); err != nil || last <= 0 || int32(last) != c.NSPid {
			t.Fatalf("parseStatus(%q) NSpid %d, the line's last is %q", b, c.NSPid, f[len(f)-1])
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
		if parseStatus(b, &c) == nil {
			checkStatus(t, b, &c)
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
