package procctx

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
	"golang.org/x/sys/unix"
)

// deepNames are the names of 45 directories of 100 characters: one in the
// other, they make a path longer than PATH_MAX.
func deepNames() []string {
	names := make([]string, 45)
	for i := range names {
		names[i] = fmt.Sprintf("%02d", i) + strings.Repeat("d", 98)
	}
	return names
}

// mkdirs makes names one in the other under the directory at, each
// relative to its parent (the whole path is past PATH_MAX), and returns a
// descriptor of the last, which the caller closes.
func mkdirs(t *testing.T, at int, names []string) int {
	t.Helper()
	fd, err := unix.Dup(at)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	return fd
}

// copyProg copies /bin/sleep into the directory at as prog.
func copyProg(t *testing.T, at int) {
	t.Helper()
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Openat(at, "prog", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = unix.Write(fd, b)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
}

// ebpfTail is what the eBPF source gives of a path past its bound: its
// last names, as many as fit whole in 4096 bytes with a NUL after each,
// joined without a leading slash.
func ebpfTail(names []string) string {
	n, i := 0, len(names)
	for i > 0 && n+len(names[i-1])+1 <= 4096 {
		n += len(names[i-1]) + 1
		i--
	}
	return strings.Join(names[i:], "/")
}

// splitPath is the names of an absolute path.
func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "/"), "/") }

// runDeep runs ./prog (a copy of sleep) from the directory names under
// base (reached by cd -P, one name at a time) and waits until it runs.
func runDeep(t *testing.T, base string, names []string) int {
	t.Helper()
	var script strings.Builder
	for _, name := range names {
		script.WriteString("cd -P " + name + " && ")
	}
	script.WriteString("exec ./prog 100")
	cmd := exec.Command("/bin/sh", "-c", script.String())
	cmd.Dir = base
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return string(b) == "./prog\x00100\x00"
	}, "./prog never ran: %s", &stderr)
	return pid
}

// tooLong checks that the kernel refuses pid's link name as longer than
// PATH_MAX: what the test is about.
func tooLong(t *testing.T, pid int, name string) {
	t.Helper()
	if _, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/" + name); !errors.Is(err, unix.ENAMETOOLONG) {
		t.Fatalf("readlink %s: %v, want ENAMETOOLONG", name, err)
	}
}

// TestIntegrationFillDeepPaths: an executable and a working directory
// whose paths are longer than PATH_MAX, whose /proc links the kernel
// refuses to read (ENAMETOOLONG), are given as the eBPF source gives them:
// their last names, as many as fit in its 4 KiB, marked cut; and whole
// when the process's own root is close enough for the path it has to fit.
// They were left out with no mark.
func TestIntegrationFillDeepPaths(t *testing.T) {
	testenv.RequireRoot(t)
	names := deepNames()

	t.Run("cwd and exe", func(t *testing.T) {
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		at, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(at)
		deep := mkdirs(t, at, names)
		copyProg(t, deep)
		unix.Close(deep)
		pid := runDeep(t, base, names)
		tooLong(t, pid, "cwd")
		tooLong(t, pid, "exe")
		ev := execEvent(t, pid)
		if err := New("/proc", 0).Fill(&ev); err != nil {
			t.Fatal(err)
		}
		whole := append(splitPath(base), names...)
		cwd, exe := ebpfTail(whole), ebpfTail(append(whole, "prog"))
		x := &ev.Exec
		if x.Cwd != cwd || !x.CwdTruncated || x.CwdDeleted {
			t.Errorf("cwd of %d bytes %q (cut %v, deleted %v), want the %d bytes %q, cut", len(x.Cwd), tail(x.Cwd), x.CwdTruncated, x.CwdDeleted, len(cwd), tail(cwd))
		}
		if ev.Exe != exe || !x.ExeTruncated || x.ExeDeleted {
			t.Errorf("exe of %d bytes %q (cut %v, deleted %v), want the %d bytes %q, cut", len(ev.Exe), tail(ev.Exe), x.ExeTruncated, x.ExeDeleted, len(exe), tail(exe))
		}
		if !ev.Ctx.Valid || ev.Ctx.Absent != 0 || len(ev.Argv) != 2 {
			t.Errorf("context valid %v absent %v argv %q, want all of it", ev.Ctx.Valid, ev.Ctx.Absent, ev.Argv)
		}
	})

	// A program past PATH_MAX that is not in the working directory (run
	// by a relative path from 6 names down) has no name to find: it is
	// given none, marked cut, and the working directory whole.
	t.Run("exe elsewhere", func(t *testing.T) {
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		at, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(at)
		deep := mkdirs(t, at, names)
		copyProg(t, deep)
		unix.Close(deep)
		var script strings.Builder
		for _, name := range names[:6] {
			script.WriteString("cd -P " + name + " && ")
		}
		script.WriteString("exec " + strings.Join(names[6:], "/") + "/prog 100")
		cmd := exec.Command("/bin/sh", "-c", script.String())
		cmd.Dir = base
		var stderr testenv.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pid := cmd.Process.Pid
		testenv.Eventually(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			return strings.HasSuffix(string(b), "/prog\x00100\x00")
		}, "prog never ran: %s", &stderr)
		tooLong(t, pid, "exe")
		ev := execEvent(t, pid)
		if err := New("/proc", 0).Fill(&ev); err != nil {
			t.Fatal(err)
		}
		cwd := filepath.Join(append([]string{base}, names[:6]...)...)
		x := &ev.Exec
		if ev.Exe != "" || !x.ExeTruncated || x.ExeDeleted {
			t.Errorf("exe %q (cut %v, deleted %v), want none, cut", tail(ev.Exe), x.ExeTruncated, x.ExeDeleted)
		}
		if x.Cwd != cwd || x.CwdTruncated {
			t.Errorf("cwd %q (cut %v), want %q whole", tail(x.Cwd), x.CwdTruncated, tail(cwd))
		}
	})

	// The walk up crosses from a mount's root to its mountpoint, as the
	// eBPF source's does.
	t.Run("mount crossing", func(t *testing.T) {
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		at, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(at)
		mid := mkdirs(t, at, names[:10])
		unix.Close(mid)
		mnt := filepath.Join(append([]string{base}, names[:10]...)...)
		if err := unix.Mount("none", mnt, "tmpfs", 0, "size=8m"); err != nil {
			testenv.Skip(t, "no tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
		top, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		deep := mkdirs(t, top, names[10:])
		unix.Close(top)
		copyProg(t, deep)
		unix.Close(deep)
		pid := runDeep(t, base, names)
		tooLong(t, pid, "cwd")
		ev := execEvent(t, pid)
		if err := New("/proc", 0).Fill(&ev); err != nil {
			t.Fatal(err)
		}
		whole := append(splitPath(base), names...)
		cwd, exe := ebpfTail(whole), ebpfTail(append(whole, "prog"))
		x := &ev.Exec
		if x.Cwd != cwd || !x.CwdTruncated {
			t.Errorf("cwd of %d bytes %q (cut %v), want the %d bytes %q, cut", len(x.Cwd), tail(x.Cwd), x.CwdTruncated, len(cwd), tail(cwd))
		}
		if ev.Exe != exe || !x.ExeTruncated {
			t.Errorf("exe of %d bytes %q (cut %v), want the %d bytes %q, cut", len(ev.Exe), tail(ev.Exe), x.ExeTruncated, len(exe), tail(exe))
		}
	})

	// A process whose root is 20 names down and whose working directory
	// is the other 25 has a path that fits from its root: whole, as eBPF
	// gives it, though the reader's /proc link is past PATH_MAX. Its
	// program is beyond its root: cut, as in TestIntegrationFillRoots.
	t.Run("inside a chroot", func(t *testing.T) {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			testenv.Skip(t, "no gcc to build the roots helper: %v", err)
		}
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(base, 0o755)
		helper := filepath.Join(base, "roots")
		if out, err := exec.Command(gcc, "-O1", "-Wall", "-o", helper, "testdata/roots.c").CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v: %s", err, out)
		}
		at, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(at)
		unix.Close(mkdirs(t, at, names))
		root := filepath.Join(append([]string{base}, names[:20]...)...)
		rel := strings.Join(names[20:], "/")
		cmd := exec.Command(helper, "inroot", root, rel)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr testenv.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			t.Fatalf("helper: %q %v: %s", line, err, &stderr)
		}
		pid := cmd.Process.Pid
		tooLong(t, pid, "cwd")
		ev := execEvent(t, pid)
		if err := New("/proc", 0).Fill(&ev); err != nil {
			t.Fatal(err)
		}
		x := &ev.Exec
		if x.Cwd != "/"+rel || x.CwdTruncated {
			t.Errorf("cwd of %d bytes %q (cut %v), want the whole %d bytes %q", len(x.Cwd), tail(x.Cwd), x.CwdTruncated, len(rel)+1, tail(rel))
		}
		if ev.Exe != helper[1:] || !x.ExeTruncated {
			t.Errorf("exe %q (cut %v), want %q, cut", ev.Exe, x.ExeTruncated, helper[1:])
		}
	})
}

// direntsOf reads the getdents64 records of directory d whole.
func direntsOf(t testing.TB, d string) []byte {
	t.Helper()
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var all []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return all
		}
		all = append(all, buf[:n]...)
	}
}

// TestNextDirent: the records getdents64 gives parse as the names
// os.ReadDir lists, with their inodes; a cut or bad record does not.
func TestNextDirent(t *testing.T) {
	d := t.TempDir()
	want := map[string]uint64{}
	for _, name := range []string{"a", "with space", "new\nline", strings.Repeat("n", 255), "prog (deleted)"} {
		if err := os.WriteFile(filepath.Join(d, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(d, name), &st); err != nil {
			t.Fatal(err)
		}
		want[name] = st.Ino
	}
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := direntsOf(t, d)
	got := map[string]uint64{}
	types := map[string]uint8{}
	for rest := b; len(rest) > 0; {
		ino, typ, name, next, ok := nextDirent(rest)
		if !ok {
			t.Fatalf("record at %d of %d does not parse", len(b)-len(rest), len(b))
		}
		got[string(name)], types[string(name)] = ino, typ
		rest = next
	}
	for name, ino := range want {
		if got[name] != ino || types[name] != unix.DT_REG && types[name] != unix.DT_UNKNOWN {
			t.Errorf("%q: inode %d type %d, want %d, a file", name, got[name], types[name], ino)
		}
	}
	if _, ok := got["."]; !ok || len(got) != len(want)+3 || types["sub"] != unix.DT_DIR && types["sub"] != unix.DT_UNKNOWN {
		t.Errorf("names %d (with . %v, sub's type %d), want %d with ., .. and sub", len(got), ok, types["sub"], len(want)+3)
	}
	rec := func(reclen uint16, name string) []byte {
		r := make([]byte, direntName, int(reclen))
		binary.NativeEndian.PutUint16(r[16:], reclen)
		r = append(r, name...)
		return r[:cap(r)]
	}
	for _, bad := range [][]byte{
		nil,
		b[:direntName-1],
		rec(24, "ab/c"),       // a '/'
		rec(24, "abcde"),      // no NUL within the record
		rec(20, "\x00"),       // empty name
		rec(19, ""),           // no room for a name
		rec(30, "x\x00")[:25], // cut
	} {
		if _, _, _, _, ok := nextDirent(bad); ok {
			t.Errorf("%q parses", bad)
		}
	}
}

// FuzzNextDirent: no input makes nextDirent panic, loop or give a name
// that is not one: empty, with a NUL or a '/'.
func FuzzNextDirent(f *testing.F) {
	f.Add(direntsOf(f, "testdata"))
	f.Add(direntsOf(f, "/"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for rest := b; len(rest) > 0; {
			_, _, name, next, ok := nextDirent(rest)
			if !ok {
				break
			}
			if len(name) == 0 || bytes.IndexByte(name, 0) >= 0 || bytes.IndexByte(name, '/') >= 0 {
				t.Fatalf("name %q", name)
			}
			if len(next) >= len(rest) {
				t.Fatalf("no progress: %d bytes left of %d", len(next), len(rest))
			}
			rest = next
		}
	})
}

// TestLastNames: the last names of a path that fit with a separator each.
func TestLastNames(t *testing.T) {
	for _, tt := range []struct {
		p    string
		n    int
		want string
	}{
		{"/a/bb/ccc", 100, "a/bb/ccc"},
		{"/a/bb/ccc", 9, "a/bb/ccc"},
		{"/a/bb/ccc", 8, "bb/ccc"},
		{"/a/bb/ccc", 7, "bb/ccc"},
		{"/a/bb/ccc", 6, "ccc"},
		{"/a/bb/ccc", 3, ""},
	} {
		if got := string(lastNames([]byte(tt.p), tt.n)); got != tt.want {
			t.Errorf("lastNames(%q, %d) = %q, want %q", tt.p, tt.n, got, tt.want)
		}
	}
}
