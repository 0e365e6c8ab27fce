package userdb

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestLookup(t *testing.T) {
	d := New("testdata/passwd", "testdata/group")
	users := []struct {
		id   uint32
		name string
		ok   bool
	}{
		{0, "root", true}, // the first of two entries for uid 0
		{1, "daemon", true},
		{1000, "alice", true},
		{65534, "nobody", true},
		{4242, "", false},
		{0xffffffff, "", false},
	}
	for _, tt := range users {
		if n, ok := d.User(tt.id); n != tt.name || ok != tt.ok {
			t.Errorf("User(%d) = %q, %v, want %q, %v", tt.id, n, ok, tt.name, tt.ok)
		}
	}
	for id, want := range map[uint32]string{0: "root", 4: "adm", 27: "sudo", 65534: "nogroup"} {
		if n, ok := d.Group(id); n != want || !ok {
			t.Errorf("Group(%d) = %q, %v, want %q", id, n, ok, want)
		}
	}
	if n, ok := New("testdata/none", "testdata/none").User(0); ok {
		t.Errorf("User(0) without a file = %q, want none", n)
	}
}

// TestRefresh checks that a changed file is reread once CheckEvery has
// passed, not before.
func TestRefresh(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "passwd")
	if err := os.WriteFile(p, []byte("a:x:1:1::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	d := New(p, filepath.Join(dir, "group"))
	d.now = func() time.Time { return now }
	if n, _ := d.User(1); n != "a" {
		t.Fatalf("User(1) = %q, want a", n)
	}
	if err := os.WriteFile(p, []byte("bb:x:1:1::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.User(1); n != "a" {
		t.Errorf("User(1) before CheckEvery = %q, want the cached a", n)
	}
	now = now.Add(CheckEvery)
	if n, _ := d.User(1); n != "bb" {
		t.Errorf("User(1) after CheckEvery = %q, want bb", n)
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	d := New("testdata/passwd", "testdata/group")
	d.User(0)
	if n := testing.AllocsPerRun(100, func() { d.User(1000); d.Group(27) }); n != 0 {
		t.Errorf("lookups allocate %v times", n)
	}
}

// FuzzParse checks that Parse never panics and names only ids it read.
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/passwd")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("x:y:1"))
	f.Add([]byte(":::\n\n::"))
	f.Fuzz(func(t *testing.T, b []byte) {
		all := Parse(b)
		for _, name := range all {
			if name != "" && !utf8.ValidString(name) {
				t.Fatalf("Parse(%q) named an id %q, not UTF-8", b, name)
			}
		}
		// A passwd line is a group line with one more field checked.
		for id, name := range ParsePasswd(b) {
			if _, ok := all[id]; !ok || name != "" && !utf8.ValidString(name) {
				t.Fatalf("ParsePasswd(%q) named %d %q, Parse nothing", b, id, name)
			}
		}
	})
}

// TestAt checks that a Names taken with At sees the files as of its
// moment: a change is seen by the next At once CheckEvery has passed (or
// the clock went back), while the Names taken before keeps naming as read.
func TestAt(t *testing.T) {
	dir := t.TempDir()
	p, g := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(p, []byte("a:x:1:1::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g, []byte("wheel:x:10:a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := New(p, g)
	start := time.Unix(1000, 0)
	first := d.At(start)
	if u, _ := first.User(1); u != "a" {
		t.Fatalf("User(1) = %q, want a", u)
	}
	if n, _ := first.Group(10); n != "wheel" {
		t.Fatalf("Group(10) = %q, want wheel", n)
	}
	if _, ok := first.User(2); ok {
		t.Errorf("User(2) found, want none")
	}
	if err := os.WriteFile(p, []byte("bb:x:1:1::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"before CheckEvery", start.Add(CheckEvery - 1), "a"},
		{"after CheckEvery", start.Add(CheckEvery), "bb"},
	} {
		if u, _ := d.At(tt.at).User(1); u != tt.want {
			t.Errorf("%s: User(1) = %q, want %q", tt.name, u, tt.want)
		}
	}
	if u, _ := first.User(1); u != "a" {
		t.Errorf("the first Names changed: User(1) = %q, want a", u)
	}
	if err := os.WriteFile(p, []byte("ccc:x:1:1::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u, _ := d.At(start).User(1); u != "ccc" {
		t.Errorf("after the clock went back: User(1) = %q, want ccc", u)
	}
	var none *DB
	if _, ok := none.At(start).User(0); ok {
		t.Errorf("a nil DB names uid 0")
	}
}

// TestAtConcurrent: Names taken by many goroutines at once, across
// CheckEvery boundaries and while the file changes, name uid 1 as one of
// the files written (run with -race).
func TestAtConcurrent(t *testing.T) {
	dir := t.TempDir()
	p, g := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	write := func(name string) { // whole or not at all, as a reader sees it
		if err := os.WriteFile(p+".new", []byte(name+":x:1:1::/:/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	d := New(p, g)
	start := time.Unix(1000, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				at := start.Add(time.Duration(i) * CheckEvery / 3)
				if u, ok := d.At(at).User(1); !ok || u != "a" && u != "bb" {
					t.Errorf("worker %d: At(%v).User(1) = %q, %v", w, at, u, ok)
					return
				}
			}
		})
	}
	for range 20 {
		write("bb")
		write("a")
	}
	wg.Wait()
}

func BenchmarkAt(b *testing.B) {
	d := New("testdata/passwd", "testdata/group")
	now := time.Now()
	d.At(now)
	for b.Loop() {
		d.At(now).User(1000)
	}
}

// TestNamesGen: Names of one DB share a Gen while the files stay as read,
// and get a new one when a reread changed a map; a DB whose files are
// missing still has a Gen, the zero Names none.
func TestNamesGen(t *testing.T) {
	dir := t.TempDir()
	p, g := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(p, []byte("a:x:1:1::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := New(p, g)
	start := time.Unix(1000, 0)
	first := d.At(start).Gen()
	if first == 0 {
		t.Fatal("a DB's Names have Gen 0")
	}
	if got := d.At(start.Add(CheckEvery)).Gen(); got != first {
		t.Errorf("Gen after an unchanged reread = %d, want %d", got, first)
	}
	if err := os.WriteFile(g, []byte("wheel:x:10:a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := d.At(start.Add(2 * CheckEvery)).Gen()
	if second == first {
		t.Errorf("Gen after the group file appeared = %d, unchanged", second)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if got := d.At(start.Add(3 * CheckEvery)).Gen(); got == second {
		t.Errorf("Gen after the passwd file went = %d, unchanged", got)
	}
	if got := New(filepath.Join(dir, "no"), filepath.Join(dir, "none")).At(start).Gen(); got == 0 {
		t.Error("a DB without files has Names of Gen 0")
	}
	if got := (Names{}).Gen(); got != 0 {
		t.Errorf("zero Names Gen = %d, want 0", got)
	}
}

// TestNamesGenPerDB: two DBs over the same files never share a Gen.
func TestNamesGenPerDB(t *testing.T) {
	at := time.Unix(1000, 0)
	a := New("testdata/passwd", "testdata/group").At(at).Gen()
	b := New("testdata/passwd", "testdata/group").At(at).Gen()
	if a == b {
		t.Errorf("two DBs share Gen %d", a)
	}
}

// TestLargeFileCut: a file over MaxBytes is read up to MaxBytes, and the
// line that bound cuts names nothing: the group line "staff:x:12345:bob"
// cut after "staff:x:12" would name gid 12 staff.
func TestLargeFileCut(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	b.WriteString("thirteen:x:13:\n")
	filler := "# " + string(bytes.Repeat([]byte{'f'}, 200)) + "\n"
	for b.Len()+len(filler) < MaxBytes-10 {
		b.WriteString(filler)
	}
	// One comment line ends exactly 10 bytes before the bound.
	b.WriteString("#" + string(bytes.Repeat([]byte{'p'}, MaxBytes-10-b.Len()-2)) + "\n")
	b.WriteString("staff:x:12345:bob\n")
	b.WriteString("users:x:2000:\n")
	if got := string(b.Bytes()[MaxBytes-10 : MaxBytes]); got != "staff:x:12" {
		t.Fatalf("the bound cuts at %q, want staff:x:12", got)
	}
	g := filepath.Join(dir, "group")
	if err := os.WriteFile(g, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	d := New(filepath.Join(dir, "passwd"), g)
	if n, ok := d.Group(12); ok {
		t.Errorf("Group(12) = %q: the line cut at MaxBytes named a gid it does not have", n)
	}
	if n, ok := d.Group(13); !ok || n != "thirteen" {
		t.Errorf("Group(13) = %q, %v, want thirteen", n, ok)
	}
}

// TestPasswdLines: a passwd line is taken only when glibc takes it, so an
// id is named as getpwuid names it (getent passwd, with a copy of these
// lines bound over /etc/passwd: foo's and cut's lines are skipped, 4100
// is alice).
func TestPasswdLines(t *testing.T) {
	b := []byte("foo:x:4100\nalice:x:4100:100::/home/a:/bin/sh\ncut:x:4102:\ncut2:x:4103:1\nbadgid:x:4104:x1:\n")
	got := ParsePasswd(b)
	for id, want := range map[uint32]string{4100: "alice", 4103: "cut2"} {
		if got[id] != want {
			t.Errorf("ParsePasswd: %d is %q, want %q", id, got[id], want)
		}
	}
	for _, id := range []uint32{4102, 4104} {
		if n, ok := got[id]; ok {
			t.Errorf("ParsePasswd: %d is %q, want no name", id, n)
		}
	}
	if n := Parse([]byte("wheel:x:10\n"))[10]; n != "wheel" {
		t.Errorf("Parse of a group line without members: 10 is %q, want wheel", n)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "passwd")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n, _ := New(p, filepath.Join(dir, "group")).User(4100); n != "alice" {
		t.Errorf("User(4100) = %q, want alice", n)
	}
}

// TestNameNotUTF8: a name that is not UTF-8 names nothing (JSON would show
// it with U+FFFD in place of its bytes), and a later line of its id does
// not name it either: getpwuid gives the first line.
func TestNameNotUTF8(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "passwd")
	b := "b\xe9a:x:4200:100::/:/bin/sh\nbea:x:4200:100::/:/bin/sh\nb\u00e9b:x:4201:100::/:/bin/sh\nesc\x1b:x:4202:100::/:/bin/sh\n"
	if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	d := New(p, filepath.Join(dir, "group"))
	if n, ok := d.User(4200); ok {
		t.Errorf("User(4200) = %q, want no name", n)
	}
	if n, ok := d.At(time.Now()).User(4200); ok {
		t.Errorf("At().User(4200) = %q, want no name", n)
	}
	for id, want := range map[uint32]string{4201: "b\u00e9b", 4202: "esc\x1b"} {
		if n, ok := d.User(id); !ok || n != want {
			t.Errorf("User(%d) = %q, %v, want %q", id, n, ok, want)
		}
	}
}

// TestRenameSeen: a user renamed (usermod -l writes a new passwd and
// renames it over the old) is named by the new name a second later, even
// when the new file has the old one's size and modification time (a
// rewrite within one tick of the clock that stamps files: 45 of 50 runs
// of this test missed the rename so). With a check every 10 s the daemon
// named a process that uid ran just after usermod -l feedaud1 feedaud2 as
// feedaud1.
func TestRenameSeen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "passwd")
	stamp := time.Unix(1_700_000_000, 0)
	write := func(name string) {
		if err := os.WriteFile(p+"+", []byte(name+":x:4711:100::/:/bin/false\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p+"+", stamp, stamp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+"+", p); err != nil {
			t.Fatal(err)
		}
	}
	write("feedaud1")
	d := New(p, filepath.Join(dir, "group"))
	start := time.Unix(1000, 0)
	if n, _ := d.At(start).User(4711); n != "feedaud1" {
		t.Fatalf("User(4711) = %q, want feedaud1", n)
	}
	write("feedaud2")
	if n, _ := d.At(start.Add(time.Second)).User(4711); n != "feedaud2" {
		t.Errorf("a second after the rename, User(4711) = %q, want feedaud2", n)
	}
}
