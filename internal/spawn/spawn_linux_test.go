package spawn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestMain lets the test binary be the shim: Start forks /proc/self/exe.
func TestMain(m *testing.M) {
	Main()
	os.Exit(testenv.Main(m))
}

const nobody = 65534

// startAs starts argv through the shim as uid and gid nobody in dir, with
// limits, and returns the uids the shim had while it waited for its spec,
// the workload's output and its exit status.
func startAs(t *testing.T, argv []string, dir string, limits []Limit) (waiting procfs.IDs, out string, ws unix.WaitStatus, err error) {
	t.Helper()
	return startSpec(t, Spec{Argv: argv, Limits: limits}, dir)
}

// startFrom starts spec's workload as startSpec does, with caller as
// Attr.Caller, and returns its output and error (an exit other than 0
// among them).
func startFrom(t *testing.T, spec Spec, caller *os.File) (string, error) {
	t.Helper()
	_, out, ws, err := startWith(t, spec, "/", caller)
	if err == nil && ws.ExitStatus() != 0 {
		err = fmt.Errorf("exit status %v", ws)
	}
	return out, err
}

// startSpec is startAs with the rest of spec given (its PATH and Env are
// set here).
func startSpec(t *testing.T, spec Spec, dir string) (waiting procfs.IDs, out string, ws unix.WaitStatus, err error) {
	t.Helper()
	return startWith(t, spec, dir, nil)
}

// startWith is startSpec with Attr.Caller.
func startWith(t *testing.T, spec Spec, dir string, caller *os.File) (waiting procfs.IDs, out string, ws unix.WaitStatus, err error) {
	t.Helper()
	testenv.RequireRoot(t)
	r, w, perr := os.Pipe()
	if perr != nil {
		t.Fatal(perr)
	}
	defer r.Close()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	attr := Attr{Dir: dir, Files: [3]*os.File{devnull, w, w}, CgroupFD: -1,
		Cred: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{nobody}}, Caller: caller}
	spec.Env, spec.Path = []string{"PATH=/usr/bin:/bin"}, "/usr/bin:/bin"
	p, err := Start(spec, attr, func(p Process) error {
		var rerr error
		waiting, rerr = procfs.ReadUIDs("/proc", p.Pid)
		return rerr
	})
	w.Close()
	if p.Pid == 0 {
		t.Fatalf("Start: %v", err)
	}
	defer unix.Close(p.Pidfd)
	b, _ := io.ReadAll(r)
	if _, werr := unix.Wait4(int(p.Pid), &ws, 0, nil); werr != nil {
		t.Fatal(werr)
	}
	return waiting, string(b), ws, err
}

// fromThread starts spec's workload from a locked thread that setup has
// prepared (the daemon's thread that forks the shim), and returns its
// output; a workload that could not start or exited other than 0 fails
// the test.
func fromThread(t *testing.T, setup func() error, spec Spec) string {
	t.Helper()
	out, err := fromThreadErr(t, setup, spec)
	if err != nil {
		t.Fatalf("workload: %v (output %q)", err, out)
	}
	return out
}

// fromThreadErr is fromThread returning the workload's error. The thread
// is never unlocked: it ends with its goroutine.
func fromThreadErr(t *testing.T, setup func() error, spec Spec) (string, error) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		r := result{err: errors.New("starting the workload failed")}
		defer func() { done <- r }()
		runtime.LockOSThread()
		if r.err = setup(); r.err != nil {
			r.err = fmt.Errorf("preparing the forking thread: %w", r.err)
			return
		}
		_, out, ws, err := startSpec(t, spec, "/")
		if err == nil && ws.ExitStatus() != 0 {
			err = fmt.Errorf("exit status %v", ws)
		}
		r = result{out: out, err: err}
	}()
	r := <-done
	return r.out, r.err
}

// TestIntegrationShimRootUntilItsSpec: the shim is root's while it waits
// for its spec and sets the limits (the caller can neither trace nor
// signal it, so cannot skip its setrlimit calls), and the workload runs
// with the credentials and working directory of the spec.
func TestIntegrationShimRootUntilItsSpec(t *testing.T) {
	waiting, out, ws, err := startAs(t, []string{"sh", "-c", "id -u; id -g; id -G; pwd"}, "/tmp", nil)
	if err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("workload: %v, %v, output %q", err, ws, out)
	}
	if waiting != (procfs.IDs{}) {
		t.Errorf("the shim waiting for its spec had uids %+v, want root's: a caller could trace it", waiting)
	}
	if want := fmt.Sprintf("%d\n%d\n%d\n/tmp\n", nobody, nobody, nobody); out != want {
		t.Errorf("workload says %q, want %q", out, want)
	}
}

// TestIntegrationShimNprocHolds: the caller's limit of processes holds for
// the workload's uid as for a login program's setuid and exec: the limit is
// set while the shim is root, so when the uid changes the kernel sees a uid
// past it (nobody already runs a process here, the limit is 0) and fails the
// exec with EAGAIN.
func TestIntegrationShimNprocHolds(t *testing.T) {
	testenv.RequireRoot(t)
	other := exec.Command("sleep", "60")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	_, out, ws, err := startAs(t, []string{"true"}, "/", []Limit{{Resource: unix.RLIMIT_NPROC, Soft: 0, Hard: 0}})
	var ee *ExecError
	if !errors.As(err, &ee) || !strings.Contains(ee.Reason, syscall.EAGAIN.Error()) {
		t.Errorf("exec with nproc 0 = %v (status %v, output %q), want an exec error, %v", err, ws, out, syscall.EAGAIN)
	}
	// A limit the uid is under lets it run, with that limit.
	_, out, ws, err = startAs(t, []string{"grep", "Max processes", "/proc/self/limits"}, "/", []Limit{{Resource: unix.RLIMIT_NPROC, Soft: 4096, Hard: 4096}})
	if f := strings.Fields(out); err != nil || ws.ExitStatus() != 0 || len(f) < 4 || f[2] != "4096" || f[3] != "4096" {
		t.Errorf("exec with nproc 4096 = %v, %v, output %q, want it run with the limit", err, ws, out)
	}
}

// TestIntegrationShimDirWithItsRights: the working directory is entered
// with the workload's rights: one only root may enter is refused, said as
// an exec error naming it.
func TestIntegrationShimDirWithItsRights(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, out, _, err := startAs(t, []string{"true"}, dir, nil)
	var ee *ExecError
	if !errors.As(err, &ee) || !strings.Contains(ee.Reason, dir) || !strings.Contains(ee.Reason, syscall.EACCES.Error()) {
		t.Errorf("workload in a directory only root may enter = %v (output %q), want an exec error naming it, %v", err, out, syscall.EACCES)
	}
}

// TestIntegrationExecDoneMeansDone: when Start returns, the workload holds
// none of the shim's descriptors: the status pipe, whose end Start waits
// for, is the last one the exec closes (the shim's runtime holds some of
// its own above it).
func TestIntegrationExecDoneMeansDone(t *testing.T) {
	testenv.RequireRoot(t)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	attr := Attr{Files: [3]*os.File{devnull, devnull, devnull}, CgroupFD: -1,
		Cred: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{nobody}}}
	for i := range 50 {
		p, err := Start(Spec{Argv: []string{"sleep", "60"}, Path: "/usr/bin:/bin"}, attr, nil)
		if err != nil {
			t.Fatal(err)
		}
		ents, rerr := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid))
		var names []string
		shims := false
		for _, e := range ents {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.Pid, e.Name()))
			names = append(names, e.Name()+"="+l)
			// The workload's own loader may hold its libraries a moment;
			// the shim held its spec and status pipes and the runtime's
			// cgroup files.
			if e.Name() != "0" && e.Name() != "1" && e.Name() != "2" &&
				(strings.HasPrefix(l, "pipe:") || strings.HasPrefix(l, "/sys/fs/cgroup")) {
				shims = true
			}
		}
		unix.PidfdSendSignal(p.Pidfd, unix.SIGKILL, nil, 0)
		var ws unix.WaitStatus
		unix.Wait4(int(p.Pid), &ws, 0, nil)
		unix.Close(p.Pidfd)
		if rerr != nil || shims {
			t.Fatalf("start %d: the workload holds %v (%v) when Start returns, want none of the shim's", i, names, rerr)
		}
	}
}

// TestIntegrationShimJoinsNamespaces: the workload joins the namespaces it
// is given and keeps them: a sandbox's mount namespace, with a tmpfs over
// a directory, its network namespace and its host name, all still the
// workload's after the sandbox's last process has gone (the mounts came
// apart before: a workload left in the daemon's namespace saw what the
// tmpfs had covered).
func TestIntegrationShimJoinsNamespaces(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Skip(t, "no unshare (util-linux)")
	}
	dir, err := os.MkdirTemp("", "shimns")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // the workload is nobody's
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/f", []byte("under"), 0o644); err != nil {
		t.Fatal(err)
	}
	sandbox := exec.Command("unshare", "-m", "-n", "-u", "sh", "-c",
		`mount -t tmpfs none "$0" && echo over >"$0/f" && hostname sandboxed && readlink /proc/self/ns/net && exec cat`, dir)
	stdin, err := sandbox.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var ready strings.Builder
	sandbox.Stdout = &ready
	if err := sandbox.Start(); err != nil {
		t.Fatal(err)
	}
	defer sandbox.Process.Kill()
	// Its namespaces are set once it reads its stdin (cat); each open
	// file names the process's at that time.
	var nss []Namespace
	var netns string
	for range 200 {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", sandbox.Process.Pid)); strings.HasSuffix(l, "/cat") {
			break
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	for _, ns := range []struct {
		name string
		typ  int
	}{{"net", unix.CLONE_NEWNET}, {"uts", unix.CLONE_NEWUTS}, {"mnt", unix.CLONE_NEWNS}} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", sandbox.Process.Pid, ns.name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		nss = append(nss, Namespace{File: f, Type: ns.typ})
	}
	stdin.Close()
	if err := sandbox.Wait(); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	netns = strings.TrimSpace(ready.String())
	if own, _ := os.Readlink("/proc/self/ns/net"); netns == "" || netns == own {
		t.Fatalf("sandbox's network namespace %q, the test's %q: want another", netns, own)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	attr := Attr{Dir: "/", Files: [3]*os.File{devnull, w, w}, CgroupFD: -1, Namespaces: nss,
		Cred: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{nobody}}}
	spec := Spec{Argv: []string{"sh", "-c", `cat "$0/f"; hostname; readlink /proc/self/ns/net`, dir},
		Env: []string{"PATH=/usr/bin:/bin"}, Path: "/usr/bin:/bin"}
	p, err := Start(spec, attr, nil)
	w.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer unix.Close(p.Pidfd)
	out, _ := io.ReadAll(r)
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(p.Pid), &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if want := "over\nsandboxed\n" + netns + "\n"; string(out) != want || ws.ExitStatus() != 0 {
		t.Errorf("workload in the gone sandbox's namespaces said %q (%v), want %q", out, ws, want)
	}
}

// TestIntegrationShimSetupError: a step the shim takes as root's that
// fails (here a namespace file that is not of the type given) is the
// daemon's failure, told apart from the workload's exec errors, which
// are the caller's: it was reported as a failed exec, a bad request.
func TestIntegrationShimSetupError(t *testing.T) {
	testenv.RequireRoot(t)
	f, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	attr := Attr{Files: [3]*os.File{devnull, devnull, devnull}, CgroupFD: -1,
		Namespaces: []Namespace{{File: f, Type: unix.CLONE_NEWUTS}}}
	p, err := Start(Spec{Argv: []string{"true"}, Path: "/usr/bin:/bin"}, attr, nil)
	if p.Pid != 0 {
		defer unix.Close(p.Pidfd)
		var ws unix.WaitStatus
		unix.Wait4(int(p.Pid), &ws, 0, nil)
	}
	var se *SetupError
	if !errors.As(err, &se) || errors.Is(err, ErrExec) || !strings.Contains(se.Reason, "UTS namespace") {
		t.Errorf("Start with a network namespace given as UTS = %v, want a SetupError naming the UTS namespace", err)
	}
	// A failed exec stays the caller's, whatever its program is called.
	attr.Namespaces = nil
	p, err = Start(Spec{Argv: []string{"setup"}, Path: "/usr/bin:/bin"}, attr, nil)
	if p.Pid != 0 {
		defer unix.Close(p.Pidfd)
		var ws unix.WaitStatus
		unix.Wait4(int(p.Pid), &ws, 0, nil)
	}
	if !errors.Is(err, ErrExec) || errors.Is(err, ErrSetup) {
		t.Errorf("Start of a program named setup that is nowhere = %v, want an exec error", err)
	}
}

// TestKeyringResult: a launch goes on without a keyring of its own only
// where the workload could not reach the daemon's either: a kernel without
// keys, or keyctl refused altogether (a seccomp profile). A join refused
// while the daemon's keyring is reachable, or any other error, fails it.
func TestKeyringResult(t *testing.T) {
	for _, tt := range []struct {
		join, get syscall.Errno
		ok        bool
	}{
		{0, 0, true},
		{unix.ENOSYS, 0, true},
		{unix.EPERM, unix.EPERM, true},
		{unix.EACCES, unix.EACCES, true},
		{unix.EPERM, unix.ENOSYS, true},
		{unix.EPERM, 0, false},
		{unix.EACCES, 0, false},
		{unix.EDQUOT, 0, false},
		{unix.ENOMEM, unix.EPERM, false},
	} {
		err := keyringResult(tt.join, tt.get)
		if (err == nil) != tt.ok || (err != nil && err != tt.join) {
			t.Errorf("keyringResult(%v, %v) = %v, want ok %v (else the join's error)", tt.join, tt.get, err, tt.ok)
		}
	}
}

// TestIntegrationShimBeforeExec: a caller's filter that kills the process
// or traps at execve ends the shim there. Its status pipe ends as at an
// exec, so Start says it exec'd; the zombie's name says it did not
// (BeforeExec), and so the daemon no longer answers 201 for a workload
// that never ran. A workload that ran has its own name, and one that ends
// at once is not taken for the shim.
func TestIntegrationShimBeforeExec(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		argv       []string
		before     bool
		sig        unix.Signal
	}{
		{"killed at execve", testenv.SeccompKillExec, []string{"true"}, true, unix.SIGSYS},
		// The trap's SIGSYS meets the Go runtime's handler, which exits 2.
		{"trapped at execve", testenv.SeccompTrapExec, []string{"true"}, true, -1},
		{"ran and ended", testenv.SeccompDeny, []string{"true"}, false, 0},
		{"ran and was killed", testenv.SeccompDeny, []string{"sh", "-c", "kill -SYS $$"}, false, unix.SIGSYS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller, callerFD := seccompCaller(t, tc.mode)
			devnull, _ := os.Open(os.DevNull)
			defer devnull.Close()
			attr := Attr{Dir: "/", Files: [3]*os.File{devnull, devnull, devnull}, CgroupFD: -1,
				Cred: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{nobody}}, Caller: callerFD}
			spec := Spec{Argv: tc.argv, SeccompFrom: caller, Env: []string{"PATH=/usr/bin:/bin"}, Path: "/usr/bin:/bin"}
			p, err := Start(spec, attr, nil)
			if p.Pid == 0 {
				t.Fatalf("Start: %v", err)
			}
			defer unix.Close(p.Pidfd)
			if err != nil {
				t.Fatalf("Start: %v; want the pipe's end taken for an exec", err)
			}
			fds := []unix.PollFd{{Fd: int32(p.Pidfd), Events: unix.POLLIN}}
			if n, err := unix.Poll(fds, 10_000); n != 1 {
				t.Fatalf("the process did not end: %v", err)
			}
			var st procfs.Stat
			r := procfs.Reader{Root: "/proc"}
			if err := r.ReadStat(p.Pid, &st); err != nil || !st.Zombie() {
				t.Fatalf("stat of the zombie: %v (state %c)", err, st.State)
			}
			var ws unix.WaitStatus
			if _, err := unix.Wait4(int(p.Pid), &ws, 0, nil); err != nil {
				t.Fatal(err)
			}
			if got := BeforeExec(st.CommString()); got != tc.before {
				t.Errorf("BeforeExec(%q) = %v, want %v", st.CommString(), got, tc.before)
			}
			if tc.sig >= 0 && (ws.Signaled() != (tc.sig != 0) || ws.Signaled() && ws.Signal() != tc.sig) {
				t.Errorf("status %v, want signal %v", ws, tc.sig)
			}
		})
	}
}
