package testenv

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

//go:embed testdata/spawnat.c
var spawnatSource []byte

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ErrPidTaken is returned by SpawnAt, SameTick and Reissue when another
// process holds the pid.
var ErrPidTaken = errors.New("pid is taken")

// spawnatBinary compiles the clone3 helper (testdata/spawnat.c) once per
// test binary.
func spawnatBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = compile("spawnat", spawnatSource) })
	if buildErr != nil {
		Skip(t, "cannot build the clone3 helper: %v", buildErr)
	}
	return buildPath
}

// compile builds the C program source as name in the build directory
// (see BuildDir), with the extra compiler arguments.
func compile(name string, source []byte, cflags ...string) (string, error) {
	dir, err := buildDir()
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, name+".c")
	if err := os.WriteFile(src, source, 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-O1", "-Wall", "-o", bin}, cflags...)
	if out, err := exec.Command("gcc", append(args, src)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v: %s", name, err, out)
	}
	return bin, nil
}

// FreePid returns a pid that is free right now, in the upper half of the
// default pid range (20000-29999), where the kernel's own allocation
// rarely is: a pid to force a reissue at (SpawnAt, SameTick).
func FreePid(t testing.TB) int32 {
	t.Helper()
	var p int32
	Eventually(t, 10*time.Second, func() bool {
		p = int32(20000 + time.Now().UnixNano()%10000)
		_, err := os.Stat("/proc/" + strconv.Itoa(int(p)))
		return os.IsNotExist(err)
	}, "no free pid in 20000-29999")
	return p
}

// SameTick creates a process at pid, records its start ticks and pidfs
// inode, kills and reaps it, and at once creates a second process at the
// same pid, all inside one small C helper so the two starts usually share a
// clock tick. It returns the first instance's ticks and inode and the second
// process (the caller compares start times: the kernel does not promise the
// same tick). It needs root; ErrPidTaken means the pid was in use.
func SameTick(t testing.TB, pid int32) (ticks, ino uint64, second *Spawned, err error) {
	t.Helper()
	RequireRoot(t)
	cmd := exec.Command(spawnatBinary(t), "-sametick", strconv.Itoa(int(pid)))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, nil, err
	}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	var b int32
	if rerr == nil {
		_, rerr = fmt.Sscanf(line, "%d %d %d", &ticks, &ino, &b)
	}
	if rerr != nil || b != pid {
		werr := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(werr, &ee) && ee.ExitCode() == 17 {
			return 0, 0, nil, ErrPidTaken
		}
		return 0, 0, nil, fmt.Errorf("sametick %d: %q %v (%v)", pid, line, rerr, werr)
	}
	s := &Spawned{Pid: pid, parent: cmd}
	t.Cleanup(s.Stop)
	return ticks, ino, s, nil
}

// Spawned is a process created at a chosen pid.
type Spawned struct {
	Pid    int32
	parent *exec.Cmd
	out    *bufio.Reader // the helper's stdout (SpawnAtThen's second line)
}

// SpawnAt starts argv (or a process that pauses, when argv is empty) at
// exactly pid, using clone3 with set_tid. It needs root. It returns
// ErrPidTaken when the pid is in use, so callers can pick another.
func SpawnAt(t testing.TB, pid int32, argv ...string) (*Spawned, error) {
	t.Helper()
	return spawnAt(t, false, pid, argv)
}

// SpawnAtThen starts argv at pid as SpawnAt does; once that process has
// exited, its helper (its parent, which reaps it at once) starts a process
// that pauses at the same pid: a stranger holding the pid within
// milliseconds of the first one's end, where Reissue waits for the pid to
// be free and starts a helper of its own. Successor waits for it.
func SpawnAtThen(t testing.TB, pid int32, argv ...string) (*Spawned, error) {
	t.Helper()
	if len(argv) == 0 {
		t.Fatal("SpawnAtThen needs a program")
	}
	return spawnAt(t, true, pid, argv)
}

func spawnAt(t testing.TB, then bool, pid int32, argv []string) (*Spawned, error) {
	RequireRoot(t)
	args := append([]string{strconv.Itoa(int(pid))}, argv...)
	if then {
		args = append([]string{"-then"}, args...)
	}
	cmd := exec.Command(spawnatBinary(t), args...)
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Spawned{Pid: pid, parent: cmd, out: bufio.NewReader(pipe)}
	if err := s.await(); err != nil {
		return nil, err
	}
	t.Cleanup(s.Stop)
	return s, nil
}

// await reads the helper's next line: the pid, once its process exists.
func (s *Spawned) await() error {
	line, rerr := s.out.ReadString('\n')
	if rerr != nil {
		werr := s.parent.Wait()
		s.parent = nil
		var ee *exec.ExitError
		if errors.As(werr, &ee) && ee.ExitCode() == 17 {
			return ErrPidTaken
		}
		return fmt.Errorf("spawnat %d: %v (%v)", s.Pid, rerr, werr)
	}
	if got, err := strconv.Atoi(strings.TrimSpace(line)); err != nil || int32(got) != s.Pid {
		s.Stop()
		return fmt.Errorf("spawnat %d: helper said %q", s.Pid, line)
	}
	return nil
}

// Successor waits until the process SpawnAtThen starts after the first
// one's exit holds the pid (ErrPidTaken: another process took it first).
func (s *Spawned) Successor() error {
	if s.parent == nil {
		return errors.New("spawnat: the helper is gone")
	}
	return s.await()
}

// freeWait bounds Reissue's wait for a pid to be free. A process adopted by
// init is reaped when init gets to it: a second or two here, more on a
// loaded machine.
const freeWait = 30 * time.Second

// Reissue gives pid to a stranger: it waits until no process holds pid (the
// caller kills and reaps its own child first; an orphan waits for init),
// then starts a process that pauses at exactly pid and is stopped at the
// test's cleanup. It needs root. It returns ErrPidTaken when another process
// took the pid first, and fails the test when the pid is not freed within
// 30 s or the process cannot be started.
func Reissue(t testing.TB, pid int32) (*Spawned, error) {
	t.Helper()
	RequireRoot(t)
	dir := "/proc/" + strconv.Itoa(int(pid))
	if !Poll(freeWait, func() bool { _, err := os.Stat(dir); return errors.Is(err, os.ErrNotExist) }) {
		st, _ := os.ReadFile(dir + "/stat")
		t.Fatalf("pid %d not freed for reissue within %v: %s", pid, freeWait, st)
	}
	s, err := SpawnAt(t, pid)
	if err != nil && !errors.Is(err, ErrPidTaken) {
		t.Fatalf("reissue pid %d: %v", pid, err)
	}
	return s, err
}

// Stop kills the spawned process and waits for its parent to reap it.
// Calling it again is harmless.
func (s *Spawned) Stop() {
	if s.parent == nil {
		return
	}
	// The helper's only child is s.Pid; killing it by pid is safe while the
	// helper has not reaped it, and the helper reaps only after it dies.
	syscall.Kill(int(s.Pid), syscall.SIGKILL)
	done := make(chan struct{})
	go func() { s.parent.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.parent.Process.Kill()
		<-done
	}
	s.parent = nil
}

// Start runs argv as a child of the test, in a process group of its own,
// and registers its cleanup, which kills the group.
func Start(t testing.TB, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	// A group of its own, killed whole: a shell's children, killed with
	// the shell alone, ran on under init after every run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	return cmd
}

// Shell starts `sh -c script` in its own process group and returns it
// with the pids the script prints, one a line, before it goes on; cleanup
// kills the group.
func Shell(t testing.TB, script string, lines int) (*exec.Cmd, []int32) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	r := bufio.NewReader(out)
	var pids []int32
	for i := 0; i < lines; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading pid %d of %q: %v", i, script, err)
		}
		p, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("script printed %q, want a pid", line)
		}
		pids = append(pids, int32(p))
	}
	return cmd, pids
}

// StartPiped starts c with pipes to its stdin and from its stdout, and
// returns them.
func StartPiped(t testing.TB, c *exec.Cmd) (io.WriteCloser, io.Reader) {
	t.Helper()
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return in, out
}
