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

//go:embed testdata/setuid.c
var setuidSource []byte

var (
	setuidOnce sync.Once
	setuidPath string
	setuidErr  error
)

// SetuidRoot returns a setuid-root program (testdata/setuid.c) in the
// build directory, which every user may traverse: run by any user, `hold`
// becomes root in full and waits, `exec PATH ARGV...` runs PATH as root,
// for as long as this test binary runs (the program checks that its
// builder, this process, still runs: a copy left behind by a killed run
// makes no one root). It needs root to make; it is built once per test
// binary, and Main removes it.
func SetuidRoot(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	setuidOnce.Do(func() {
		pid, start := owner()
		if start == 0 {
			setuidErr = errors.New("no start time of this process to bind the setuid helper to")
			return
		}
		bin, err := compile("setuid", setuidSource,
			fmt.Sprintf("-DOWNER_PID=%d", pid), fmt.Sprintf("-DOWNER_START=%dULL", start))
		if err != nil {
			setuidErr = err
			return
		}
		if err := os.Chown(bin, 0, 0); err != nil {
			setuidErr = err
			return
		}
		setuidPath, setuidErr = bin, os.Chmod(bin, 0o755|os.ModeSetuid)
	})
	if setuidErr != nil {
		Skip(t, "cannot make the setuid helper: %v", setuidErr)
	}
	return setuidPath
}

//go:embed testdata/cloneparent.c
var cloneParentSource []byte

var (
	cloneParentOnce sync.Once
	cloneParentPath string
	cloneParentErr  error
)

// CloneParent returns a program that makes N children with CLONE_PARENT
// (children of its own parent), which exit at once, and then waits.
func CloneParent(t testing.TB) string {
	t.Helper()
	cloneParentOnce.Do(func() { cloneParentPath, cloneParentErr = compile("cloneparent", cloneParentSource) })
	if cloneParentErr != nil {
		Skip(t, "cannot build the CLONE_PARENT helper: %v", cloneParentErr)
	}
	return cloneParentPath
}

var (
	selfOnce sync.Once
	selfPath string
	selfErr  error
)

// SelfAs returns a command that runs a copy of this test binary as cred,
// with env added to this process's environment: the copy lives in the
// build directory, which every user may traverse (the go tool's build
// directory is root's alone). A test binary's init recognises env and plays its part.
func SelfAs(t testing.TB, cred *syscall.Credential, env []string, args ...string) *exec.Cmd {
	t.Helper()
	RequireRoot(t)
	selfOnce.Do(func() {
		dir, err := buildDir()
		var b []byte
		if err == nil {
			b, err = os.ReadFile("/proc/self/exe")
		}
		if err == nil {
			selfPath = filepath.Join(dir, "test")
			err = os.WriteFile(selfPath, b, 0o755)
		}
		selfErr = err
	})
	if selfErr != nil {
		t.Fatalf("copying the test binary: %v", selfErr)
	}
	cmd := exec.Command(selfPath, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd
}

// Held starts cmd with its stdin held open until the test ends (a helper
// keeps what it opened until its stdin closes) and returns what it writes
// to stdout before closing it.
func Held(t testing.TB, cmd *exec.Cmd) []byte {
	t.Helper()
	stdin, stdout := StartPiped(t, cmd)
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	b, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// HalfSetuid starts SetuidRoot's program as cred in its "half" state (real
// and effective uid cred's, saved uid root) and returns its pid once it is
// there; it is killed when the test ends.
func HalfSetuid(t testing.TB, cred *syscall.Credential) int {
	t.Helper()
	cmd := exec.Command(SetuidRoot(t), "half")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	startSaysPid(t, cmd)
	return cmd.Process.Pid
}

// startSaysPid starts a helper that prints its pid once it is in the state
// a test wants, and waits for that line; the helper is killed when the
// test ends.
func startSaysPid(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if pid, perr := strconv.Atoi(strings.TrimSpace(line)); err != nil || perr != nil || pid != cmd.Process.Pid {
		t.Fatalf("%s said %q, %v; want its pid", filepath.Base(cmd.Path), line, err)
	}
}

//go:embed testdata/zleader.c
var zleaderSource []byte

var (
	zleaderOnce sync.Once
	zleaderPath string
	zleaderErr  error
)

// ZombieLeader starts a process whose main thread has exited while another
// thread runs (testdata/zleader.c): /proc/PID/stat says Z, yet the process
// lives. It returns once the leader has exited; the process is killed when
// the test ends.
func ZombieLeader(t testing.TB) *exec.Cmd {
	t.Helper()
	zleaderOnce.Do(func() { zleaderPath, zleaderErr = compile("zleader", zleaderSource) })
	if zleaderErr != nil {
		Skip(t, "cannot build the zombie-leader helper: %v", zleaderErr)
	}
	cmd := exec.Command(zleaderPath)
	startSaysPid(t, cmd)
	stat := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat"
	Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(stat)
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
	}, "zleader's main thread never exited")
	return cmd
}
