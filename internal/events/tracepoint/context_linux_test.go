//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/container"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// openContext loads the programs with the exec context on.
func openContext(t testing.TB, opts ...Option) (*collector, procfs.BootID) {
	t.Helper()
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(boot, append([]Option{WithExecPath()}, opts...)...)
	if errors.Is(err, events.ErrUnavailable) {
		testenv.Skip(t, "cannot load eBPF: %v", err)
	}
	if err != nil {
		t.Fatalf("New(WithExecPath) = %v", err)
	}
	return collect(t, s), boot
}

// runExec runs cmd to completion (its output in the test's log unless the
// caller set Stdout) and returns its last exec event. A missing exec must
// be covered by a reported loss (a record the full ring could not take,
// which a loaded machine can cause): then cmd runs again, three times at
// most. A missing exec without a loss fails the test.
func (c *collector) runExec(t testing.TB, cmd *exec.Cmd) events.Event {
	t.Helper()
	for try := 1; ; try++ {
		c.mu.Lock()
		from := len(c.evs)
		c.mu.Unlock()
		if cmd.Stdout != nil {
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %v", cmd.Args, err)
			}
		} else if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		pid := int32(cmd.Process.Pid)
		c.waitFor(t, "exit", is(events.Exit, pid))
		if execs := c.all(is(events.Exec, pid)); len(execs) > 0 {
			return execs[len(execs)-1]
		}
		c.mu.Lock()
		lost := slices.ContainsFunc(c.evs[from:], func(ev events.Event) bool { return ev.Kind == events.Lost })
		c.mu.Unlock()
		if !lost {
			t.Fatalf("no exec event for %d and no loss reported", pid)
		}
		if try == 3 {
			t.Fatalf("no exec event for %d: lost %d times in a row", pid, try)
		}
		t.Logf("exec of %d lost (reported): running it again", pid)
		next := exec.Command(cmd.Path, cmd.Args[1:]...)
		next.Args[0], next.Dir, next.Env, next.Stdout, next.Stderr = cmd.Args[0], cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr
		next.ExtraFiles, next.SysProcAttr = cmd.ExtraFiles, cmd.SysProcAttr
		cmd = next
	}
}

// copyTrue copies /bin/true to path: a file no symlink leads to.
func copyTrue(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationContextArgv checks that exec events carry argv exactly as
// the process received it, with its count and size, and say so when the
// bound cuts it.
func TestIntegrationContextArgv(t *testing.T) {
	c, _ := openContext(t)
	big := func(n int) []string {
		argv := []string{"/bin/true"}
		for i := 0; len(strings.Join(argv, "\x00")) < n; i++ {
			argv = append(argv, strings.Repeat(string(rune('a'+i%26)), 1000))
		}
		return argv
	}
	tests := []struct {
		name      string
		argv      []string
		truncated bool
	}{
		{"plain", []string{"/bin/true", "--flag=1", "x"}, false},
		{"spaces newlines empty unicode", []string{"/bin/true", "a b", "", "line1\nline2", "tab\there", "", "é✓日本", "\x01\x7f"}, false},
		{"no args but argv0", []string{"/bin/true"}, false},
		{"just under the bound", big(DefaultArgvMax - 2000), false},
		{"over the bound", big(DefaultArgvMax + 8000), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(tt.argv[0], tt.argv[1:]...)
			ev := c.runExec(t, cmd)
			checkArgv(t, ev, tt.argv, DefaultArgvMax, tt.truncated)
		})
	}
}

// checkArgv compares an exec event's arguments with argv under a bound.
func checkArgv(t *testing.T, ev events.Event, argv []string, bound int, truncated bool) {
	t.Helper()
	size := 0
	for _, a := range argv {
		size += len(a) + 1
	}
	if ev.Exec.ArgsCount != len(argv) || ev.Exec.ArgsSize != size || ev.Exec.ArgsTruncated != truncated {
		t.Fatalf("args count %d size %d truncated %v, want %d %d %v",
			ev.Exec.ArgsCount, ev.Exec.ArgsSize, ev.Exec.ArgsTruncated, len(argv), size, truncated)
	}
	if !truncated {
		if !slices.Equal(ev.Argv, argv) {
			t.Fatalf("argv = %q, want %q", ev.Argv, argv)
		}
		return
	}
	want := (strings.Join(argv, "\x00") + "\x00")[:bound]
	if got := strings.Join(ev.Argv, "\x00"); got != strings.TrimSuffix(want, "\x00") {
		t.Fatalf("truncated argv (%d bytes) is not the first %d bytes of the real one", len(got), bound)
	}
}

// TestIntegrationContextArgvBound checks WithArgvMax: a larger bound
// carries a 100 KiB argv whole, a smaller one cuts it where it says.
func TestIntegrationContextArgvBound(t *testing.T) {
	argv := []string{"/bin/true"}
	for i := 0; i < 100; i++ {
		argv = append(argv, strings.Repeat("x", 1023))
	}
	for _, bound := range []int{128 << 10, 4096} {
		c, _ := openContext(t, WithArgvMax(bound))
		ev := c.runExec(t, exec.Command(argv[0], argv[1:]...))
		checkArgv(t, ev, argv, bound, bound < 100<<10)
		c.src.Close()
	}
}

// TestIntegrationContextExe checks that the executable is the file the
// kernel resolved, however execve named it, and that cwd is absolute.
func TestIntegrationContextExe(t *testing.T) {
	c, _ := openContext(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "bin", "x")
	copyTrue(t, real)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	helper := helperPath(t)
	sh := realPath(t, "/bin/sh")

	tests := []struct {
		name     string
		cmd      func() *exec.Cmd
		exe, cwd string
		argv     []string
	}{
		{"relative ./x", func() *exec.Cmd { return &exec.Cmd{Path: "./x", Args: []string{"./x"}, Dir: filepath.Join(dir, "bin")} },
			real, filepath.Join(dir, "bin"), []string{"./x"}},
		{"relative ../bin/x", func() *exec.Cmd {
			return &exec.Cmd{Path: "../bin/x", Args: []string{"../bin/x", "a"}, Dir: sub}
		}, real, sub, []string{"../bin/x", "a"}},
		{"symlink", func() *exec.Cmd { return &exec.Cmd{Path: filepath.Join(dir, "link"), Args: []string{"link"}, Dir: dir} },
			real, dir, []string{"link"}},
		{"fexecve", func() *exec.Cmd {
			return &exec.Cmd{Path: helper, Args: []string{helper, "fexecve", real, "by-fd", "z"}, Dir: "/"}
		}, real, "/", []string{"by-fd", "z"}},
		{"#! script: the interpreter", func() *exec.Cmd { return &exec.Cmd{Path: script, Args: []string{script}, Dir: dir} },
			sh, dir, []string{"/bin/sh", script}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := c.runExec(t, tt.cmd())
			if ev.Exe != tt.exe || ev.Exec.ExeTruncated {
				t.Errorf("exe = %q (truncated %v), want %q", ev.Exe, ev.Exec.ExeTruncated, tt.exe)
			}
			if ev.Exec.Cwd != tt.cwd || ev.Exec.CwdTruncated {
				t.Errorf("cwd = %q (truncated %v), want %q", ev.Exec.Cwd, ev.Exec.CwdTruncated, tt.cwd)
			}
			if !slices.Equal(ev.Argv, tt.argv) {
				t.Errorf("argv = %q, want %q", ev.Argv, tt.argv)
			}
		})
	}
}

// TestIntegrationContextDeepCwd checks a working directory deep in a tree:
// whole within the walk's bound, marked truncated (and a true suffix) past
// it.
func TestIntegrationContextDeepCwd(t *testing.T) {
	c, _ := openContext(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{100, 200} {
		dir := filepath.Join(root, strings.Repeat("d/", depth))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/true")
		cmd.Dir = dir
		ev := c.runExec(t, cmd)
		if depth == 100 {
			if ev.Exec.Cwd != dir || ev.Exec.CwdTruncated {
				t.Errorf("depth %d: cwd = %q (truncated %v), want %q", depth, ev.Exec.Cwd, ev.Exec.CwdTruncated, dir)
			}
			continue
		}
		if !ev.Exec.CwdTruncated || strings.HasPrefix(ev.Exec.Cwd, "/") || !strings.HasSuffix(dir, "/"+ev.Exec.Cwd) {
			t.Errorf("depth %d: cwd = %q (truncated %v), want a relative suffix of %q marked truncated",
				depth, ev.Exec.Cwd, ev.Exec.CwdTruncated, dir)
		}
	}
}

// TestIntegrationContextCreds checks the ids of a process run as nobody
// with supplementary groups.
func TestIntegrationContextCreds(t *testing.T) {
	c, _ := openContext(t)
	cmd := exec.Command("/bin/true")
	groups := []uint32{4242, 100, 65534}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65533, Groups: groups}}
	ev := c.runExec(t, cmd)
	x := ev.Ctx
	if !x.Valid || x.UID != 65534 || x.EUID != 65534 || x.SUID != 65534 || x.GID != 65533 || x.EGID != 65533 || x.SGID != 65533 {
		t.Errorf("ids = %+v, want uid 65534 and gid 65533 everywhere", x)
	}
	got := slices.Clone(x.Groups[:min(x.NGroups, events.MaxGroups)])
	slices.Sort(got)
	want := slices.Clone(groups)
	slices.Sort(want)
	if x.NGroups != len(groups) || !slices.Equal(got, want) {
		t.Errorf("groups = %v (%d), want %v", got, x.NGroups, want)
	}
	// The audit ids are the test's own (inherited through fork and exec).
	if x.Audit {
		b, err := os.ReadFile("/proc/self/loginuid")
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(b)); want != "" && want != strconv.FormatUint(uint64(x.LoginUID), 10) {
			t.Errorf("loginuid = %d, want %s", x.LoginUID, want)
		}
	}
}

// TestIntegrationContextSessionTTY checks a session leader on a pty: its
// session and group are its own pid and token, the tty is the pty's, and it
// is interactive; a child of the test has the test's session and no tty
// unless the test has one.
func TestIntegrationContextSessionTTY(t *testing.T) {
	c, boot := openContext(t)
	_, pts, n := testenv.Pty(t)
	cmd := exec.Command("/bin/sh", "-c", "read x")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := int32(cmd.Process.Pid)
	ev := c.waitFor(t, "exec", is(events.Exec, pid))
	h, err := pidfd.Open(pid, boot)
	if err != nil {
		t.Fatal(err)
	}
	tok := h.Token()
	h.Close()
	x := ev.Ctx
	if x.SID != pid || x.PGID != pid || x.SessionLeader != tok || x.GroupLeader != tok {
		t.Errorf("sid %d pgid %d leaders %v %v, want %d and the process's own token %v", x.SID, x.PGID, x.SessionLeader, x.GroupLeader, pid, tok)
	}
	if !x.TTY || x.TTYMajor != 136 || x.TTYMinor != n || !x.Interactive() {
		t.Errorf("tty %v %d:%d interactive %v, want pts %d (136:%d)", x.TTY, x.TTYMajor, x.TTYMinor, x.Interactive(), n, n)
	}
	// A session leader on the pty whose stdin is not the terminal: a tty,
	// not interactive.
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	_, pts2, _ := testenv.Pty(t)
	bg := exec.Command("/bin/true")
	bg.Stdin, bg.Stdout, bg.Stderr = null, pts2, pts2
	bg.ExtraFiles = []*os.File{pts2}
	bg.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	if ev := c.runExec(t, bg); !ev.Ctx.TTY || ev.Ctx.Interactive() {
		t.Errorf("stdin /dev/null: tty %v interactive %v, want a tty and not interactive", ev.Ctx.TTY, ev.Ctx.Interactive())
	}

	// The fork before the exec inherited the test's session.
	fork := c.waitFor(t, "fork", is(events.Fork, pid))
	self, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if !fork.Ctx.Valid || fork.Ctx.SID != int32(self) {
		t.Errorf("fork sid = %d, want the test's %d", fork.Ctx.SID, self)
	}

	// A plain child: the test's session and group, no new tty.
	ev2 := c.runExec(t, exec.Command("/bin/true"))
	if ev2.Ctx.SID != int32(self) || ev2.Ctx.PGID != int32(unix.Getpgrp()) {
		t.Errorf("child sid %d pgid %d, want %d %d", ev2.Ctx.SID, ev2.Ctx.PGID, self, unix.Getpgrp())
	}
}

// TestIntegrationContextPidNS checks a process in a new pid namespace: its
// namespace pid is 1 and the namespace inode is the one /proc shows.
func TestIntegrationContextPidNS(t *testing.T) {
	c, _ := openContext(t)
	cmd := exec.Command("/bin/sh", "-c", "read x")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	pid := int32(cmd.Process.Pid)
	ev := c.waitFor(t, "exec", is(events.Exec, pid))
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(int(pid))+"/ns/pid", &st); err != nil {
		t.Fatal(err)
	}
	if ev.Ctx.NSPid != 1 || uint64(ev.Ctx.PidNS) != st.Ino {
		t.Errorf("ns pid %d ns %d, want 1 and %d", ev.Ctx.NSPid, ev.Ctx.PidNS, st.Ino)
	}
	// The test itself is in the initial namespace.
	ev2 := c.runExec(t, exec.Command("/bin/true"))
	if ev2.Ctx.NSPid != ev2.Pid || ev2.Ctx.PidNS != initPidNSIno {
		t.Errorf("ns pid %d ns %#x, want %d %#x", ev2.Ctx.NSPid, ev2.Ctx.PidNS, ev2.Pid, initPidNSIno)
	}
}

// nsIno returns the inode of namespace link ns of process pid ("self"
// for the test).
func nsIno(t testing.TB, pid, ns string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/"+ns, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestIntegrationContextMntNS checks the mount namespace of execs: a
// process in a private one, made by root or by nobody through a user
// namespace (unshare -Urm, what any user may run to bind its own files on
// any name), has that namespace's inode, which /proc shows; a plain one
// has the test's; and a fork carries it too.
func TestIntegrationContextMntNS(t *testing.T) {
	c, _ := openContext(t)
	sh := realPath(t, "/bin/sh")
	host := nsIno(t, "self", "mnt")

	plain := c.runExec(t, exec.Command("/bin/true"))
	if uint64(plain.Ctx.MntNS) != host {
		t.Errorf("plain exec: mnt ns %d, want the test's %d", plain.Ctx.MntNS, host)
	}
	if fork := c.waitFor(t, "fork", is(events.Fork, plain.Pid)); uint64(fork.Ctx.MntNS) != host {
		t.Errorf("plain fork: mnt ns %d, want the test's %d", fork.Ctx.MntNS, host)
	}

	tests := []struct {
		name string
		argv []string
	}{
		{"root, CLONE_NEWNS", nil},
		{"nobody, unshare -Urm", []string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "unshare", "-Urm"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := "mntns-" + strconv.Itoa(i)
			argv := append(slices.Clone(tt.argv), sh, "-c", "readlink /proc/self/ns/mnt", marker)
			var out strings.Builder
			cmd := exec.Command(argv[0], argv[1:]...)
			if tt.argv == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
			} else if _, err := exec.LookPath(argv[0]); err != nil {
				testenv.Skip(t, "%s: %v", argv[0], err)
			}
			cmd.Stdout = &out
			c.runExec(t, cmd)
			var ino uint64
			if _, err := fmt.Sscanf(out.String(), "mnt:[%d]", &ino); err != nil {
				t.Fatalf("shell printed %q: %v", out.String(), err)
			}
			ev := c.waitFor(t, "the shell's exec", func(ev *events.Event) bool {
				return ev.Kind == events.Exec && ev.Exe == sh && len(ev.Argv) == 4 && ev.Argv[3] == marker
			})
			if uint64(ev.Ctx.MntNS) != ino || ino == host {
				t.Errorf("mnt ns %d, want the shell's own %d (the test's is %d)", ev.Ctx.MntNS, ino, host)
			}
		})
	}
}

// TestIntegrationContextDeleted checks the marks of a program and a
// working directory unlinked before the exec: the path is the name each
// had, marked deleted, even when another file holds that name now; a
// memfd, which never had a name, and a plain exec are not marked.
func TestIntegrationContextDeleted(t *testing.T) {
	c, _ := openContext(t)
	dir := realPath(t, t.TempDir())
	tru := realPath(t, "/bin/true")

	prog := filepath.Join(dir, "prog")
	copyTrue(t, prog)
	f, err := os.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	// Another program takes the name.
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	mfd, err := unix.MemfdCreate("supervisor-deleted", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	mem := os.NewFile(uintptr(mfd), "memfd")
	defer mem.Close()
	b, err := os.ReadFile(tru)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Write(b); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name           string
		cmd            func() *exec.Cmd
		exe, cwd       string
		exeTrunc       bool
		exeDel, cwdDel bool
	}{
		{"plain", func() *exec.Cmd { c := exec.Command(tru); c.Dir = dir; return c }, tru, dir, false, false, false},
		{"unlinked program by descriptor", func() *exec.Cmd {
			c := exec.Command("/proc/self/fd/3", "by-fd")
			c.ExtraFiles, c.Dir = []*os.File{f}, dir
			return c
		}, prog, dir, false, true, false},
		{"removed working directory", func() *exec.Cmd {
			return exec.Command("/bin/sh", "-c", `cd "$0" && rmdir "$0" && exec "$1"`, gone, tru)
		}, tru, gone, false, false, true},
		{"memfd", func() *exec.Cmd {
			c := exec.Command("/proc/self/fd/3", "fileless")
			c.ExtraFiles, c.Dir = []*os.File{mem}, dir
			return c
		}, "memfd:supervisor-deleted", dir, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := c.runExec(t, tt.cmd())
			x := ev.Exec
			if ev.Exe != tt.exe || x.ExeTruncated != tt.exeTrunc || x.ExeDeleted != tt.exeDel {
				t.Errorf("exe = %q (truncated %v, deleted %v), want %q (%v, %v)", ev.Exe, x.ExeTruncated, x.ExeDeleted, tt.exe, tt.exeTrunc, tt.exeDel)
			}
			if x.Cwd != tt.cwd || x.CwdTruncated || x.CwdDeleted != tt.cwdDel {
				t.Errorf("cwd = %q (truncated %v, deleted %v), want %q (false, %v)", x.Cwd, x.CwdTruncated, x.CwdDeleted, tt.cwd, tt.cwdDel)
			}
		})
	}
}

// cgroup2Root finds the cgroup2 mount in mountinfo.
func cgroup2Root(t testing.TB) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts ... - fstype source opts
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && fields[3] == "/" {
				return fields[4]
			}
		}
	}
	testenv.Skip(t, "no cgroup2 mount")
	return ""
}

// TestIntegrationContextContainer runs a process in a cgroup laid out as
// docker's systemd driver does and checks the cgroup path, id and
// container id.
func TestIntegrationContextContainer(t *testing.T) {
	c, _ := openContext(t)
	root := cgroup2Root(t)
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(raw[:])
	parent := filepath.Join(root, "supervisor-test-"+id[:8]+".slice")
	dir := filepath.Join(parent, "docker-"+id+".scope")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(parent)
	defer os.Remove(dir)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	ev := c.runExec(t, cmd)
	wantPath := strings.TrimPrefix(dir, root)
	if ev.Exec.Cgroup != wantPath || ev.Exec.ContainerID != id || ev.Exec.ContainerRuntime != "docker" || ev.Ctx.CgroupID != st.Ino {
		t.Errorf("cgroup %q id %d container %q, want %q %d %q", ev.Exec.Cgroup, ev.Ctx.CgroupID, ev.Exec.ContainerID, wantPath, st.Ino, id)
	}
	if got, _, _ := container.ID(wantPath); got != id {
		t.Errorf("container.ID(%q) = %q", wantPath, got)
	}
	// Sub-cgroups nested below the scope past the walk's bound (32
	// names): the path is cut at its top, the container is still named.
	deep := dir
	for i := range 32 {
		deep = filepath.Join(deep, "n"+strconv.Itoa(i))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for d := deep; d != dir; d = filepath.Dir(d) {
			os.Remove(d)
		}
	}()
	dfd, err := unix.Open(deep, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	cmd = exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: dfd}
	ev = c.runExec(t, cmd)
	if wantPath := strings.TrimPrefix(deep, root+"/"); !ev.Exec.CgroupTruncated || !strings.HasSuffix(wantPath, ev.Exec.Cgroup) || ev.Exec.ContainerID != id || ev.Exec.ContainerRuntime != "docker" {
		t.Errorf("deep: cgroup %q (truncated %v) container %q (%q), want a suffix of %q, truncated, and %q (docker)",
			ev.Exec.Cgroup, ev.Exec.CgroupTruncated, ev.Exec.ContainerID, ev.Exec.ContainerRuntime, wantPath, id)
	}
	// The test's own exec children are in no container.
	ev2 := c.runExec(t, exec.Command("/bin/true"))
	if ev2.Exec.ContainerID != "" || !strings.HasPrefix(ev2.Exec.Cgroup, "/") {
		t.Errorf("plain child cgroup %q container %q", ev2.Exec.Cgroup, ev2.Exec.ContainerID)
	}
}

// TestIntegrationContextMountCrossing runs a program through a bind mount
// and from a working directory inside another one: the walk crosses from
// each mount's root to its mountpoint, so the paths are the ones through
// the mounts, as /proc shows them.
func TestIntegrationContextMountCrossing(t *testing.T) {
	c, _ := openContext(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	copyTrue(t, filepath.Join(src, "deep", "x"))
	mnt := filepath.Join(dir, "mnt", "point")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, mnt, "", unix.MS_BIND, ""); err != nil {
		testenv.Skip(t, "bind mount: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	cmd := exec.Command(filepath.Join(mnt, "deep", "x"))
	cmd.Dir = filepath.Join(mnt, "deep")
	ev := c.runExec(t, cmd)
	if want := filepath.Join(mnt, "deep", "x"); ev.Exe != want || ev.Exec.ExeTruncated {
		t.Errorf("exe = %q (truncated %v), want %q", ev.Exe, ev.Exec.ExeTruncated, want)
	}
	if want := filepath.Join(mnt, "deep"); ev.Exec.Cwd != want || ev.Exec.CwdTruncated {
		t.Errorf("cwd = %q (truncated %v), want %q", ev.Exec.Cwd, ev.Exec.CwdTruncated, want)
	}
}

// mountTmpfs mounts a tmpfs on a new directory dir until the test ends.
func mountTmpfs(t testing.TB, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		testenv.Skip(t, "mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestIntegrationContextUnreachable runs programs whose path, or working
// directory, the walk cannot lead to the process's root: on a lazily
// unmounted tmpfs (a detached mount, whose names would read as a path from
// /) and beyond a chroot. Each is marked truncated, its names without a
// leading slash, never an absolute path the process's root does not lead
// to; a program inside the same chroot still has its whole path. A
// program run from a memfd (no path at all) is its name, memfd:NAME, so
// marked.
func TestIntegrationContextUnreachable(t *testing.T) {
	c, _ := openContext(t)
	dir := realPath(t, t.TempDir())
	helper := helperPath(t)
	tru := realPath(t, "/bin/true")

	t.Run("lazily unmounted", func(t *testing.T) {
		mnt := mountTmpfs(t, filepath.Join(dir, "m"))
		copyTrue(t, filepath.Join(mnt, "usr", "bin", "sudo"))
		prog, err := os.Open(filepath.Join(mnt, "usr", "bin", "sudo"))
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Close()
		wd, err := os.Open(filepath.Join(mnt, "usr"))
		if err != nil {
			t.Fatal(err)
		}
		defer wd.Close()
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
		// The child inherits the descriptors until its exec: the program
		// and the directory through them, on the detached mount.
		cmd := exec.Command("/proc/self/fd/" + strconv.Itoa(int(prog.Fd())))
		cmd.Dir = "/proc/self/fd/" + strconv.Itoa(int(wd.Fd()))
		ev := c.runExec(t, cmd)
		if ev.Exe != "usr/bin/sudo" || !ev.Exec.ExeTruncated {
			t.Errorf("exe = %q (truncated %v), want \"usr/bin/sudo\" marked truncated", ev.Exe, ev.Exec.ExeTruncated)
		}
		if ev.Exec.Cwd != "usr" || !ev.Exec.CwdTruncated {
			t.Errorf("cwd = %q (truncated %v), want \"usr\" marked truncated", ev.Exec.Cwd, ev.Exec.CwdTruncated)
		}
	})

	t.Run("moved out of a bind mount", func(t *testing.T) {
		// A directory renamed out of the subtree a bind mount shows: its
		// file's parents never meet the mount's root, they end at the
		// filesystem's, which is no name of the path.
		fs, mnt := mountTmpfs(t, filepath.Join(dir, "fs")), filepath.Join(dir, "bind")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		copyTrue(t, filepath.Join(fs, "shown", "sub", "x"))
		if err := unix.Mount(filepath.Join(fs, "shown"), mnt, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		defer unix.Unmount(mnt, unix.MNT_DETACH)
		prog, err := os.Open(filepath.Join(mnt, "sub", "x"))
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Close()
		if err := os.Rename(filepath.Join(fs, "shown", "sub"), filepath.Join(fs, "sub")); err != nil {
			t.Fatal(err)
		}
		ev := c.runExec(t, exec.Command("/proc/self/fd/"+strconv.Itoa(int(prog.Fd()))))
		if ev.Exe != "sub/x" || !ev.Exec.ExeTruncated {
			t.Errorf("exe = %q (truncated %v), want \"sub/x\" marked truncated", ev.Exe, ev.Exec.ExeTruncated)
		}
	})

	t.Run("memfd", func(t *testing.T) {
		fd, err := unix.MemfdCreate("supervisor-test", unix.MFD_CLOEXEC)
		if err != nil {
			testenv.Skip(t, "memfd_create: %v", err)
		}
		mem := os.NewFile(uintptr(fd), "memfd")
		defer mem.Close()
		b, err := os.ReadFile(tru)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Write(b); err != nil {
			t.Fatal(err)
		}
		ev := c.runExec(t, exec.Command("/proc/self/fd/"+strconv.Itoa(fd), "fileless"))
		if ev.Exe != "memfd:supervisor-test" || !ev.Exec.ExeTruncated {
			t.Errorf("exe = %q (truncated %v), want \"memfd:supervisor-test\" marked truncated", ev.Exe, ev.Exec.ExeTruncated)
		}
	})

	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("beyond a chroot", func(t *testing.T) {
		// The chroot is a bind of / in the helper's own mount namespace:
		// the program, opened before, and the directory, left as it was,
		// are reached only through the mounts the root is not on.
		cmd := exec.Command(helper, "chroot-fexecve", root, tru, "true", "beyond")
		cmd.Dir = dir
		ev := c.runExec(t, cmd)
		if want := strings.TrimPrefix(tru, "/"); ev.Exe != want || !ev.Exec.ExeTruncated {
			t.Errorf("exe = %q (truncated %v), want %q marked truncated", ev.Exe, ev.Exec.ExeTruncated, want)
		}
		if want := strings.TrimPrefix(dir, "/"); ev.Exec.Cwd != want || !ev.Exec.CwdTruncated {
			t.Errorf("cwd = %q (truncated %v), want %q marked truncated", ev.Exec.Cwd, ev.Exec.CwdTruncated, want)
		}
		if !slices.Equal(ev.Argv, []string{"true", "beyond"}) {
			t.Errorf("argv = %q", ev.Argv)
		}
	})
	t.Run("inside a chroot", func(t *testing.T) {
		ev := c.runExec(t, exec.Command(helper, "chroot-exec", root, tru, "true", "inside"))
		if ev.Exe != tru || ev.Exec.ExeTruncated {
			t.Errorf("exe = %q (truncated %v), want %q", ev.Exe, ev.Exec.ExeTruncated, tru)
		}
		if ev.Exec.Cwd != "/" || ev.Exec.CwdTruncated {
			t.Errorf("cwd = %q (truncated %v), want /", ev.Exec.Cwd, ev.Exec.CwdTruncated)
		}
	})
}

// TestIntegrationContextPidNSDeep checks a process in the deepest pid
// namespace the kernel allows (32 levels below the initial one): its
// namespace pid and inode are its own, not the initial namespace's.
func TestIntegrationContextPidNSDeep(t *testing.T) {
	c, _ := openContext(t)
	helper := helperPath(t)
	sh := realPath(t, "/bin/sh")
	const marker = "pidns-deep"
	var out strings.Builder
	cmd := exec.Command(helper, "nest-pidns", "32", sh, "sh", "-c", "echo $$; readlink /proc/self/ns/pid", marker)
	cmd.Stdout = &out
	c.runExec(t, cmd)
	var vpid int32
	var ino uint64
	if _, err := fmt.Sscanf(out.String(), "%d\npid:[%d]", &vpid, &ino); err != nil {
		t.Fatalf("shell printed %q: %v", out.String(), err)
	}
	ev := c.waitFor(t, "the shell's exec", func(ev *events.Event) bool {
		return ev.Kind == events.Exec && ev.Exe == sh && len(ev.Argv) == 4 && ev.Argv[3] == marker
	})
	if ev.Ctx.NSPid != vpid || uint64(ev.Ctx.PidNS) != ino {
		t.Errorf("ns pid %d ns %d, want %d %d", ev.Ctx.NSPid, ev.Ctx.PidNS, vpid, ino)
	}
}

// TestIntegrationContextLoss fills the ring buffer with exec records of
// 32 KiB of arguments while nothing reads it: the records that cannot be
// written are counted and reported as a Lost event, never dropped
// silently, and the records that were written decode whole.
func TestIntegrationContextLoss(t *testing.T) {
	s := openFor(t, true)
	defer s.Close()
	argv := []string{"/bin/true", strings.Repeat("y", DefaultArgvMax)}
	const runs = 2 * contextRingMin / DefaultArgvMax // records of 32 KiB and more: twice the ring
	for range runs {
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			t.Fatal(err)
		}
	}
	var lost uint64
	var whole int
	for lost == 0 {
		var ev events.Event
		if err := s.Read(&ev); err != nil {
			t.Fatalf("Read() = %v", err)
		}
		switch {
		case ev.Kind == events.Lost:
			lost = ev.Count
		case ev.Kind == events.Exec && ev.Exec.ArgsSize == len(argv[0])+len(argv[1])+2:
			if !ev.Exec.ArgsTruncated || len(ev.Argv) != 2 || ev.Argv[0] != argv[0] {
				t.Fatalf("exec record not whole: %d args, truncated %v", len(ev.Argv), ev.Exec.ArgsTruncated)
			}
			whole++
		}
	}
	if whole == 0 || whole+int(lost) < runs || s.Stats().Lost < lost {
		t.Errorf("%d exec records read and %d lost (stats %+v), want some of each adding up to at least %d", whole, lost, s.Stats(), runs)
	}
}

// TestIntegrationExecBlobs checks SetExecBlobs: switched off, an exec
// event carries its context but no executable, directory, cgroup or
// arguments (absent, not another exec's); switched on again, the next exec
// carries them whole; and after Close the switch does nothing.
func TestIntegrationExecBlobs(t *testing.T) {
	c, _ := openContext(t)
	argv := []string{"/bin/true", "exec-blobs-marker", "--secret=x"}
	exe, err := filepath.EvalSymlinks(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	c.src.SetExecBlobs(false)
	off := c.runExec(t, exec.Command(argv[0], argv[1:]...))
	if !off.Ctx.Valid || off.Ctx.UID != uint32(os.Getuid()) || off.Ctx.PidNS == 0 {
		t.Errorf("exec without blobs: context %+v, want it whole", off.Ctx)
	}
	if off.Exe != "" || off.Argv != nil || off.Exec != (events.ExecInfo{}) {
		t.Errorf("exec without blobs: exe %q argv %q exec %+v, want none", off.Exe, off.Argv, off.Exec)
	}
	c.src.SetExecBlobs(true)
	on := c.runExec(t, exec.Command(argv[0], argv[1:]...))
	checkArgv(t, on, argv, DefaultArgvMax, false)
	if on.Exe != exe || on.Exec.Cwd == "" {
		t.Errorf("exec with blobs again: exe %q cwd %q, want %q and a directory", on.Exe, on.Exec.Cwd, exe)
	}
	c.src.Close()
	c.src.SetExecBlobs(false) // unmapped: must not fault
}
