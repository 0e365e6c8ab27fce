package userns

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestParseSubUID(t *testing.T) {
	lookup := func(name string) (uint32, bool) {
		uid, ok := map[string]uint32{"alice": 1001, "dockremap": 0}[name]
		return uid, ok
	}
	in := "alice:100000:65536\n# a comment\n\n1002:165536:65536\nghost:231072:65536\nbad:line\n1003:x:1\n1004:5:0\n1005:4294967295:2\ndockremap:300000:65536\n"
	want := []Range{{1001, 100000, 65536}, {1002, 165536, 65536}, {0, 300000, 65536}}
	if got := ParseSubUID([]byte(in), lookup); !slices.Equal(got, want) {
		t.Errorf("ParseSubUID = %v, want %v", got, want)
	}
}

// FuzzParseSubUID: every range parsed is a line's, within the uid space,
// never empty.
func FuzzParseSubUID(f *testing.F) {
	f.Add([]byte("alice:100000:65536\n1002:165536:65536\n"))
	f.Add([]byte("x:4294967295:1\n:0:1\n1:2:3:4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range ParseSubUID(b, func(string) (uint32, bool) { return 7, true }) {
			if r.Count == 0 || uint64(r.Start)+uint64(r.Count) > 1<<32 {
				t.Fatalf("range %+v from %q", r, b)
			}
		}
	})
}

// TestSubordinateOf: a uid in a user's range is that user's, outside any
// range (or in root's) its own; the file is read again when it changes.
func TestSubordinateOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subuid")
	prev := SubUIDFile
	SubUIDFile = path
	t.Cleanup(func() {
		SubUIDFile = prev
		subuids.Lock()
		subuids.checked, subuids.mod, subuids.size, subuids.ranges = time.Time{}, time.Time{}, 0, nil
		subuids.Unlock()
	})
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		subuids.Lock()
		subuids.checked = time.Time{} // look again now
		subuids.Unlock()
	}
	write("1001:100000:65536\n0:300000:65536\n")
	for uid, want := range map[uint32]uint32{100000: 1001, 165535: 1001, 165536: 165536, 1001: 1001, 300001: 300001, 5: 5} {
		if got := SubordinateOf(uid); got != want {
			t.Errorf("SubordinateOf(%d) = %d, want %d", uid, got, want)
		}
	}
	write("1002:100000:10\n")
	if got := SubordinateOf(100005); got != 1002 {
		t.Errorf("after the file changed, SubordinateOf(100005) = %d, want 1002", got)
	}
	if got := SubordinateOf(100010); got != 100010 {
		t.Errorf("after the file changed, SubordinateOf(100010) = %d, want its own", got)
	}
}
