package procctx

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"golang.org/x/sys/unix"
)

const nobody = 65534

// started runs argv as configured by setup and waits until it has exec'd
// the program (its exe link names it).
func started(t *testing.T, setup func(*exec.Cmd), argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if setup != nil {
		setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	want, _ := filepath.EvalSymlinks(argv[0])
	// The exe link names the new program before the exec has set up its
	// arguments (a Fill then is of a process inside its exec): done once
	// both are there.
	testenv.Eventually(t, 10*time.Second, func() bool {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe")
		args, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		return exe == want && len(args) > 0
	}, "%s never exec'd", argv[0])
	return cmd
}

// execEvent is an exec event of pid with its start time, as netlink's
// token would carry it.
func execEvent(t *testing.T, pid int) events.Event {
	t.Helper()
	var st procfs.Stat
	if err := procfs.NewReader("/proc").ReadStat(int32(pid), &st); err != nil {
		t.Fatal(err)
	}
	return events.Event{Kind: events.Exec, Pid: int32(pid), Token: token.Token{Prec: token.Ticks, Start: st.StartTime}}
}

func TestIntegrationFill(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	// sh keeps its argv while it waits for sleep.
	argv := []string{"/bin/sh", "-c", "sleep 100; :", "a b", "", "x\ny"}
	cmd := started(t, func(c *exec.Cmd) {
		c.Dir = dir
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true,
			Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{7, 9}}}
	}, argv...)
	pid := cmd.Process.Pid
	ev := execEvent(t, pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	exe, _ := filepath.EvalSymlinks("/bin/sh")
	cwd, _ := filepath.EvalSymlinks(dir)
	c := ev.Ctx
	if !c.Valid || !slices.Equal(ev.Argv, argv) || ev.Exe != exe || ev.Exec.Cwd != cwd {
		t.Errorf("argv %q exe %q cwd %q valid %v; want %q %q %q", ev.Argv, ev.Exe, ev.Exec.Cwd, c.Valid, argv, exe, cwd)
	}
	if ev.Exec.ArgsCount != len(argv) || ev.Exec.ArgsTruncated || ev.Exec.ArgsSize != len(strings.Join(argv, "\x00"))+1 {
		t.Errorf("args count %d size %d truncated %v", ev.Exec.ArgsCount, ev.Exec.ArgsSize, ev.Exec.ArgsTruncated)
	}
	if c.UID != nobody || c.EUID != nobody || c.SUID != nobody || c.GID != nobody || c.NGroups != 2 || c.Groups[0] != 7 || c.Groups[1] != 9 {
		t.Errorf("ids %+v, want nobody with groups 7, 9", c)
	}
	if c.Undumpable {
		t.Error("a process exec'd as nobody read as not dumpable")
	}
	if c.SID != int32(pid) || c.PGID != int32(pid) || c.TTY || c.NSPid != int32(pid) {
		t.Errorf("sid %d pgid %d tty %v nspid %d; want %d, %d, no tty, %d", c.SID, c.PGID, c.TTY, c.NSPid, pid, pid, pid)
	}
	var ns unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &ns); err != nil || uint64(c.PidNS) != ns.Ino {
		t.Errorf("pid ns %d, want %d (%v)", c.PidNS, ns.Ino, err)
	}
	if err := unix.Stat("/proc/self/ns/mnt", &ns); err != nil || uint64(c.MntNS) != ns.Ino {
		t.Errorf("mnt ns %d, want the test's %d (%v)", c.MntNS, ns.Ino, err)
	}
	if ev.Exec.ExeDeleted || ev.Exec.CwdDeleted {
		t.Errorf("exe deleted %v cwd deleted %v, want neither", ev.Exec.ExeDeleted, ev.Exec.CwdDeleted)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if mnt, ok := procfs.Cgroup2Mount(mi); ok {
		var cg unix.Stat_t
		if err := unix.Stat(mnt+ev.Exec.Cgroup, &cg); err != nil || c.CgroupID != cg.Ino || ev.Exec.Cgroup == "" {
			t.Errorf("cgroup %q id %d, want the inode of %s%s (%v)", ev.Exec.Cgroup, c.CgroupID, mnt, ev.Exec.Cgroup, err)
		}
	}
	if ev.Exec.ContainerID != "" {
		t.Errorf("container id %q for a process in no container", ev.Exec.ContainerID)
	}

	other := execEvent(t, pid)
	other.Token.Start++
	if err := New("/proc", 0).Fill(&other); !errors.Is(err, ErrGone) || other.Ctx.Valid || other.Argv != nil {
		t.Errorf("another instance's token: %v, ctx valid %v, argv %q; want ErrGone and nothing filled", err, other.Ctx.Valid, other.Argv)
	}
	// A token in seconds (the ps fallback's) cannot tell the instance it
	// names from another that took the pid within its second: one whose
	// second is not even this process's got this process's context.
	ps := execEvent(t, pid)
	ps.Token = token.Token{Prec: token.Second, Start: 1}
	if err := New("/proc", 0).Fill(&ps); !errors.Is(err, ErrGone) || ps.Ctx.Valid || ps.Argv != nil {
		t.Errorf("a token in seconds: %v, ctx valid %v, argv %q; want ErrGone and nothing filled", err, ps.Ctx.Valid, ps.Argv)
	}
}

// TestIntegrationFillUndumpable: a root process that became nobody in
// place (no exec) has nobody's ids in /proc, but is not dumpable: nobody
// may not read its executable or working directory, and the context says
// so; one exec'd as nobody is dumpable.
func TestIntegrationFillUndumpable(t *testing.T) {
	testenv.RequireRoot(t)
	perl, err := exec.LookPath("perl")
	if err != nil {
		testenv.Skip(t, "no perl: %v", err)
	}
	for _, tc := range []struct {
		name       string
		argv       []string
		cred       *syscall.Credential
		undumpable bool
	}{
		{"became nobody in place", []string{perl, "-e", `$( = $) = "65534 65534"; $< = $> = 65534; sleep 100`}, nil, true},
		{"exec'd as nobody", []string{perl, "-e", "sleep 100"}, &syscall.Credential{Uid: nobody, Gid: nobody}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := started(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: tc.cred} }, tc.argv...)
			ev := execEvent(t, cmd.Process.Pid)
			var err error
			testenv.Eventually(t, 10*time.Second, func() bool {
				ev = execEvent(t, cmd.Process.Pid)
				err = New("/proc", 0).Fill(&ev)
				return err == nil && ev.Ctx.EUID == nobody
			}, "never read with nobody's ids: %v, %+v", err, ev.Ctx)
			c := ev.Ctx
			if c.UID != nobody || c.SUID != nobody || c.GID != nobody || c.EGID != nobody || c.Undumpable != tc.undumpable {
				t.Errorf("ids %d/%d/%d %d/%d/%d, undumpable %v; want all nobody's, undumpable %v",
					c.UID, c.EUID, c.SUID, c.GID, c.EGID, c.SGID, c.Undumpable, tc.undumpable)
			}
		})
	}
}

func TestIntegrationFillTruncated(t *testing.T) {
	testenv.RequireRoot(t)
	long := strings.Repeat("z", 5000)
	// sh keeps its argv while it waits for sleep (sleep would refuse the
	// long argument and exit).
	argv := []string{"/bin/sh", "-c", "sleep 100; :", long, "tail"}
	cmd := started(t, nil, argv...)
	ev := execEvent(t, cmd.Process.Pid)
	if err := New("/proc", 100).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	x := ev.Exec
	if !x.ArgsTruncated || x.ArgsCount != len(argv) || x.ArgsSize != len(strings.Join(argv, "\x00"))+1 ||
		len(strings.Join(ev.Argv, "\x00")) > 100 || ev.Argv[0] != "/bin/sh" {
		t.Errorf("truncated %v count %d size %d argv %d bytes; want cut at 100 bytes of %d args", x.ArgsTruncated, x.ArgsCount, x.ArgsSize, len(strings.Join(ev.Argv, "\x00")), len(argv))
	}
}

func TestIntegrationFillGone(t *testing.T) {
	testenv.RequireRoot(t)
	// A zombie: exited, not yet reaped.
	z := exec.Command("/bin/true")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	pid := z.Process.Pid
	ev := execEvent(t, pid)
	testenv.Eventually(t, 10*time.Second, func() bool {
		var st procfs.Stat
		return procfs.NewReader("/proc").ReadStat(int32(pid), &st) == nil && st.Zombie()
	}, "true never exited")
	if err := New("/proc", 0).Fill(&ev); !errors.Is(err, ErrGone) || ev.Ctx.Valid || ev.Argv != nil {
		t.Errorf("a zombie: %v, valid %v, argv %q; want ErrGone and nothing", err, ev.Ctx.Valid, ev.Argv)
	}
	z.Wait()
	if err := New("/proc", 0).Fill(&ev); !errors.Is(err, ErrGone) || ev.Ctx.Valid {
		t.Errorf("a reaped process: %v; want ErrGone", err)
	}
}

// TestIntegrationFillChanged: a poller's event names the process as its
// snapshot saw it; when the process has exec'd another program since,
// /proc's path and arguments are the later program's, and the event gets
// none of them (ErrChanged). Before, a poller's start of a shell carried
// the name "sh" with the path and arguments of the sleep it became.
func TestIntegrationFillChanged(t *testing.T) {
	testenv.RequireRoot(t)
	sh := exec.Command("/bin/sh", "-c", "exec /bin/sleep 600")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	testenv.Eventually(t, 10*time.Second, func() bool {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(sh.Process.Pid) + "/exe")
		args, _ := os.ReadFile("/proc/" + strconv.Itoa(sh.Process.Pid) + "/cmdline")
		return strings.HasSuffix(exe, "/sleep") && len(args) > 0
	}, "the shell never became sleep")
	tests := []struct {
		name     string
		comm     string
		inferred bool
		want     error
	}{
		{"a poller's, named as the shell", "sh", true, ErrChanged},
		{"a poller's, named as now", "sleep", true, nil},
		{"a poller's without a name", "", true, nil},
		{"a source's (the name is its own business)", "sh", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := execEvent(t, sh.Process.Pid)
			ev.Inferred = tt.inferred
			copy(ev.Comm[:], tt.comm)
			err := New("/proc", 0).Fill(&ev)
			if !errors.Is(err, tt.want) || (err != nil) == ev.Ctx.Valid || (err != nil) != (ev.Exe == "") {
				t.Errorf("Fill = %v, valid %v, exe %q; want %v, and the context only without an error", err, ev.Ctx.Valid, ev.Exe, tt.want)
			}
		})
	}
}

func TestIntegrationFillTTY(t *testing.T) {
	testenv.RequireRoot(t)
	_, pts, _ := testenv.Pty(t)
	cmd := started(t, func(c *exec.Cmd) {
		c.Stdin, c.Stdout, c.Stderr = pts, pts, pts
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}, "/bin/sleep", "100")
	ev := execEvent(t, cmd.Process.Pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	var s unix.Stat_t
	if err := unix.Fstat(int(pts.Fd()), &s); err != nil {
		t.Fatal(err)
	}
	c := ev.Ctx
	if !c.TTY || !c.StdTTY || !c.Interactive() || c.TTYMajor != unix.Major(s.Rdev) || c.TTYMinor != unix.Minor(s.Rdev) {
		t.Errorf("tty %v std %v %d:%d; want the pty %d:%d on stdin and stderr", c.TTY, c.StdTTY, c.TTYMajor, c.TTYMinor, unix.Major(s.Rdev), unix.Minor(s.Rdev))
	}
}

// TestIntegrationFillDeleted: a program and a working directory unlinked
// since the exec read as the paths they had, as the eBPF source gives them
// (the kernel's /proc links append " (deleted)"); a program whose real
// name ends in " (deleted)" keeps its name.
func TestIntegrationFillDeleted(t *testing.T) {
	testenv.RequireRoot(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		file   string // the program's name in dir
		unlink bool   // unlink the program and its working directory
	}{
		{"unlinked", "sleepy", true},
		{"named so", "sleepy (deleted)", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cwd := filepath.Join(dir, tt.name+" cwd")
			if err := os.Mkdir(cwd, 0o755); err != nil {
				t.Fatal(err)
			}
			prog := filepath.Join(dir, tt.file)
			if err := os.WriteFile(prog, b, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := started(t, func(c *exec.Cmd) { c.Dir = cwd }, prog, "100")
			if tt.unlink {
				if err := os.Remove(prog); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(cwd); err != nil {
					t.Fatal(err)
				}
				link, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe")
				if !strings.HasSuffix(link, " (deleted)") {
					t.Fatalf("the kernel's exe link is %q, without the suffix this test is about", link)
				}
			}
			ev := execEvent(t, cmd.Process.Pid)
			if err := New("/proc", 0).Fill(&ev); err != nil {
				t.Fatal(err)
			}
			if ev.Exe != prog || ev.Exec.Cwd != cwd {
				t.Errorf("exe %q cwd %q, want %q %q", ev.Exe, ev.Exec.Cwd, prog, cwd)
			}
			if x := ev.Exec; x.ExeDeleted != tt.unlink || x.CwdDeleted != tt.unlink || x.ExeTruncated || x.CwdTruncated {
				t.Errorf("exe deleted %v (cut %v) cwd deleted %v (cut %v), want deleted %v, not cut",
					x.ExeDeleted, x.ExeTruncated, x.CwdDeleted, x.CwdTruncated, tt.unlink)
			}
		})
	}
}

// TestIntegrationFillMntNS: a process in a mount namespace of its own,
// made by nobody through a user namespace (unshare -Urm, open to any
// user) with a tmpfs over a directory, has that namespace's inode, not
// the reader's.
func TestIntegrationFillMntNS(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"setpriv", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "%s: %v", tool, err)
		}
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
		"unshare", "-Urm", sh, "-c", "mount -t tmpfs none /tmp && cd /tmp && exec sleep 100")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)
	sleep, _ := filepath.EvalSymlinks("/bin/sleep")
	testenv.Eventually(t, 10*time.Second, func() bool {
		exe, _ := os.Readlink("/proc/" + pid + "/exe")
		return exe == sleep
	}, "sleep never ran in the namespace: %s", &stderr)
	var own, host unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/mnt", &own); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/self/ns/mnt", &host); err != nil {
		t.Fatal(err)
	}
	ev := execEvent(t, cmd.Process.Pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	if uint64(ev.Ctx.MntNS) != own.Ino || own.Ino == host.Ino {
		t.Errorf("mnt ns %d, want the process's %d (the reader's is %d)", ev.Ctx.MntNS, own.Ino, host.Ino)
	}
	if ev.Exec.Cwd != "/tmp" || ev.Exec.CwdTruncated {
		t.Errorf("cwd %q (cut %v), want /tmp: the path in the process's namespace", ev.Exec.Cwd, ev.Exec.CwdTruncated)
	}
}

// TestIntegrationFillTracedExec: a shell that execs sleep, held by its
// tracer at sleep's exec (PTRACE_O_TRACEEXEC: the stop comes before the
// kernel sends the exec's message), already shows sleep in /proc. Reading
// the context for the shell's exec then fails with ErrInExec and fills
// nothing; once the stop is over, the read is sleep's as usual.
func TestIntegrationFillTracedExec(t *testing.T) {
	testenv.RequireRoot(t)
	// ptrace requests come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/bin/sh", "-c", "exec /bin/sleep 100", "traced")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}()
	wait := func(what string) syscall.WaitStatus {
		t.Helper()
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
			t.Fatalf("%s: wait4 = %v, status %v; want a stop", what, err, ws)
		}
		return ws
	}
	wait("the shell's exec") // the SIGTRAP after the traced child's exec
	shell := execEvent(t, pid)
	if err := syscall.PtraceSetOptions(pid, syscall.PTRACE_O_TRACEEXEC); err != nil {
		t.Fatal(err)
	}
	if err := syscall.PtraceCont(pid, 0); err != nil {
		t.Fatal(err)
	}
	if ws := wait("sleep's exec"); ws.StopSignal() != syscall.SIGTRAP || ws.TrapCause() != syscall.PTRACE_EVENT_EXEC {
		t.Fatalf("stop %v cause %d, want PTRACE_EVENT_EXEC", ws.StopSignal(), ws.TrapCause())
	}
	ev := shell
	if err := New("/proc", 0).Fill(&ev); !errors.Is(err, ErrInExec) || ev.Argv != nil || ev.Ctx.Valid {
		t.Errorf("held inside sleep's exec: Fill = %v, argv %q, ctx valid %v; want ErrInExec and nothing", err, ev.Argv, ev.Ctx.Valid)
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		t.Fatal(err)
	}
	sleep := []string{"/bin/sleep", "100"}
	testenv.EventuallyNil(t, 10*time.Second, func() error {
		ev := shell
		if err := New("/proc", 0).Fill(&ev); err != nil {
			return err
		}
		if !slices.Equal(ev.Argv, sleep) {
			return fmt.Errorf("argv %q, want %q", ev.Argv, sleep)
		}
		return nil
	}, "released, the process reads as sleep")
}

// TestIntegrationFillManyGroups: a process with 2000 supplementary groups
// has a status file of over 14 KiB. Read whole, it gives the count and the
// first groups, and the namespace pid on the line after them (a status cut
// at 4 KiB gave 565 groups and no namespace pid).
func TestIntegrationFillManyGroups(t *testing.T) {
	testenv.RequireRoot(t)
	groups := make([]uint32, 2000)
	for i := range groups {
		groups[i] = uint32(100000 + i)
	}
	cmd := started(t, func(c *exec.Cmd) {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: groups}}
	}, "/bin/sleep", "100")
	pid := cmd.Process.Pid
	ev := execEvent(t, pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	c := ev.Ctx
	if c.NGroups != len(groups) || !slices.Equal(c.Groups[:], groups[:events.MaxGroups]) || c.NSPid != int32(pid) {
		t.Errorf("groups %d (first %v), namespace pid %d; want %d (first %v), %d", c.NGroups, c.Groups, c.NSPid, len(groups), groups[:events.MaxGroups], pid)
	}
}

// TestIntegrationFillLongCgroup: a process in a cgroup whose path is
// 4094 bytes (the longest /proc/PID/cgroup shows is PATH_MAX-1) has a
// cgroup file of over 4 KiB; it is read with its whole path, not one cut
// short that names another cgroup, and not marked cut. Its id is marked
// absent: a path that long cannot be looked up whole (it was 0).
func TestIntegrationFillLongCgroup(t *testing.T) {
	path, pid := inDeepCgroup(t, 4094)
	ev := execEvent(t, pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Exec.Cgroup != path || ev.Exec.CgroupTruncated {
		t.Errorf("cgroup of %d bytes ending %q (cut %v), want the %d bytes ending %q", len(ev.Exec.Cgroup), tail(ev.Exec.Cgroup), ev.Exec.CgroupTruncated, len(path), tail(path))
	}
	if ev.Ctx.Has(events.CtxCgroup) || ev.Ctx.CgroupID != 0 {
		t.Errorf("cgroup id %d (absent %v) of a path too long to look up, want it marked absent", ev.Ctx.CgroupID, !ev.Ctx.Has(events.CtxCgroup))
	}
}

// TestIntegrationFillCutCgroup: a process in a cgroup whose path is longer
// than PATH_MAX has a /proc/PID/cgroup that the kernel cut at PATH_MAX-1
// bytes: the path read is marked cut, and its id absent (it was 0, from a
// failed lookup, and a cut path may name another cgroup).
func TestIntegrationFillCutCgroup(t *testing.T) {
	path, pid := inDeepCgroup(t, 4300)
	ev := execEvent(t, pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Exec.Cgroup) != 4095 || !strings.HasPrefix(path, ev.Exec.Cgroup) || !ev.Exec.CgroupTruncated {
		t.Errorf("cgroup of %d bytes (cut %v), want the first 4095 of %d, marked cut", len(ev.Exec.Cgroup), ev.Exec.CgroupTruncated, len(path))
	}
	if ev.Ctx.Has(events.CtxCgroup) || ev.Ctx.CgroupID != 0 || ev.Exec.ContainerID != "" {
		t.Errorf("cgroup id %d (absent %v), container %q; want the id marked absent, no container", ev.Ctx.CgroupID, !ev.Ctx.Has(events.CtxCgroup), ev.Exec.ContainerID)
	}
}

// inDeepCgroup makes cgroups one under the other, each made relative to
// its parent, until the path under the cgroup2 mount is want bytes long,
// starts a process in the deepest and returns that path and its pid.
func inDeepCgroup(t *testing.T, want int) (string, int) {
	t.Helper()
	mnt, top := tempCgroup(t, "procctx-long-")
	path := strings.TrimPrefix(top, mnt)
	fds := []int{}
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fds = append(fds, fd)
	names := []string{}
	t.Cleanup(func() {
		for i := len(names) - 1; i >= 0; i-- {
			unix.Unlinkat(fds[i], names[i], unix.AT_REMOVEDIR)
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		os.Remove(top)
	})
	for i := 0; len(path) < want; i++ {
		name := strings.Repeat(string(rune('a'+i)), min(250, want-len(path)-1))
		if err := unix.Mkdirat(fds[len(fds)-1], name, 0o755); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		fd, err := unix.Openat(fds[len(fds)-1], name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		path += "/" + name
	}
	cmd := started(t, nil, "/bin/sleep", "100")
	// Killed and reaped before the cleanup above removes its cgroup.
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	procs, err := unix.Openat(fds[len(fds)-1], "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = unix.Write(procs, []byte(strconv.Itoa(cmd.Process.Pid)))
	unix.Close(procs)
	if err != nil {
		t.Fatal(err)
	}
	return path, cmd.Process.Pid
}

func tail(s string) string { return s[max(0, len(s)-20):] }

// TestIntegrationFillContainer: a process in a cgroup laid out as podman's
// systemd driver lays out a container's (libpod-ID.scope) is read with
// that cgroup path, the container id and the runtime, as the eBPF source
// gives them.
func TestIntegrationFillContainer(t *testing.T) {
	mnt, top := tempCgroup(t, "procctx-ctr-")
	id := fmt.Sprintf("%064x", time.Now().UnixNano())
	dir := filepath.Join(top, "libpod-"+id+".scope")
	if err := os.Mkdir(dir, 0o755); err != nil {
		os.Remove(top)
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir); os.Remove(top) })
	cmd := started(t, nil, "/bin/sleep", "100")
	// Killed and reaped before the cleanup above removes its cgroup.
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	ev := execEvent(t, cmd.Process.Pid)
	if err := New("/proc", 0).Fill(&ev); err != nil {
		t.Fatal(err)
	}
	x := &ev.Exec
	if want := strings.TrimPrefix(dir, mnt); x.Cgroup != want || x.ContainerID != id || x.ContainerRuntime != "podman" {
		t.Errorf("cgroup %q container %q (%q), want %q %q (podman)", x.Cgroup, x.ContainerID, x.ContainerRuntime, want, id)
	}
}

// tempCgroup makes a new cgroup named prefix... under the cgroup2 mount
// (found in mountinfo), as root, and returns the mount and its path; the
// caller removes it. It skips (testenv.Skip) without cgroup2.
func tempCgroup(t *testing.T, prefix string) (mnt, dir string) {
	t.Helper()
	testenv.RequireRoot(t)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mnt, ok := procfs.Cgroup2Mount(mi)
	if !ok {
		testenv.Skip(t, "no cgroup2 mount")
	}
	dir, err = os.MkdirTemp(mnt, prefix)
	if err != nil {
		testenv.Skip(t, "cannot make a cgroup under %s: %v", mnt, err)
	}
	return mnt, dir
}

// TestIntegrationFillRoots: the exe and cwd paths are the ones the process
// has from its own root, as the eBPF source reads them, or are cut: the
// kernel writes a /proc link's target from the reader's root, so a chroot
// reads with its directory in front, and a program outside the process's
// root, on a mount detached since, or in a memfd reads as an absolute path
// the process does not have. A program copied to a tmpfs as usr/bin/sudo
// and run after the tmpfs was lazily unmounted read as /usr/bin/sudo,
// whole, before.
func TestIntegrationFillRoots(t *testing.T) {
	testenv.RequireRoot(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Skip(t, "no gcc to build the roots helper: %v", err)
	}
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	helper := filepath.Join(tmp, "roots")
	if out, err := exec.Command(gcc, "-O1", "-Wall", "-o", helper, "testdata/roots.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	sleep, err := filepath.EvalSymlinks("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	chroot := filepath.Join(tmp, "root")
	mnt := filepath.Join(tmp, "mnt")
	for _, d := range []string{chroot, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("none", mnt, "tmpfs", 0, "size=8m"); err != nil {
		testenv.Skip(t, "no tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := os.MkdirAll(filepath.Join(mnt, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(sleep); err != nil || os.WriteFile(filepath.Join(mnt, "usr/bin/sudo"), b, 0o755) != nil {
		t.Fatalf("copying %s: %v", sleep, err)
	}
	for _, tt := range []struct {
		name               string
		args               []string
		exe, cwd           string
		exeWhole, cwdWhole bool
	}{
		{"chroot", []string{"chroot", chroot, "/bin/sleep"}, sleep, "/", true, true},
		{"beyond the chroot", []string{"beyond", chroot, "/bin/sleep"}, sleep[1:], "/", false, true},
		{"detached mount", []string{"detached", mnt, "usr/bin/sudo"}, "usr/bin/sudo", "usr/bin", false, false},
		{"memfd", []string{"memfd", sleep}, "memfd:procctx-roots", "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			argv0 := "sleep-roots-" + strconv.Itoa(os.Getpid())
			cmd := exec.Command(helper, append(tt.args, argv0, "100")...)
			cmd.Dir = tmp
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			pid := cmd.Process.Pid
			testenv.Eventually(t, 10*time.Second, func() bool {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				return strings.HasPrefix(string(b), argv0+"\x00")
			}, "the helper never ran sleep: %s", &stderr)
			ev := execEvent(t, pid)
			if err := New("/proc", 0).Fill(&ev); err != nil {
				t.Fatal(err)
			}
			cwd := tt.cwd
			if cwd == "" {
				cwd = tmp
			}
			x := &ev.Exec
			if ev.Exe != tt.exe || x.ExeTruncated != !tt.exeWhole {
				t.Errorf("exe %q (cut %v), want %q (cut %v)", ev.Exe, x.ExeTruncated, tt.exe, !tt.exeWhole)
			}
			if x.Cwd != cwd || x.CwdTruncated != !tt.cwdWhole {
				t.Errorf("cwd %q (cut %v), want %q (cut %v)", x.Cwd, x.CwdTruncated, cwd, !tt.cwdWhole)
			}
			// Nothing here was unlinked: a memfd never had a name.
			if x.ExeDeleted || x.CwdDeleted {
				t.Errorf("exe deleted %v cwd deleted %v, want neither", x.ExeDeleted, x.CwdDeleted)
			}
		})
	}
}

// BenchmarkFill reads the context of a sleeping shell: the common path,
// with paths that fit in PATH_MAX.
func BenchmarkFill(b *testing.B) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 100; :")
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		args, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.HasPrefix(string(args), "/bin/sh\x00") || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var st procfs.Stat
	if err := procfs.NewReader("/proc").ReadStat(int32(pid), &st); err != nil {
		b.Fatal(err)
	}
	r := New("/proc", 0)
	b.ReportAllocs()
	for b.Loop() {
		ev := events.Event{Kind: events.Exec, Pid: int32(pid), Token: token.Token{Prec: token.Ticks, Start: st.StartTime}}
		if err := r.Fill(&ev); err != nil {
			b.Fatal(err)
		}
	}
}
