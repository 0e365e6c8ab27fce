package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// The programs the helpers build (the C helpers, SelfAs's copy of the test
// binary, a package's own builds through BuildDir) live in one directory
// per test binary, named for the test binary's pid and start time:
// /tmp/supervisor-testenv-PID-START-XXXX, mode 0755 (the helpers run as
// other users too). Main removes it when the tests end; a run that died
// before (a timeout, a kill) leaves it behind, and the next test binary
// that builds removes every such directory whose process is gone. One of
// the helpers is setuid root: it also refuses to run once the test binary
// that built it has ended (testdata/setuid.c), so a directory left behind
// holds no program that makes anyone root.

const buildPrefix = "supervisor-testenv-"

var (
	buildDirOnce sync.Once
	buildDirPath string
	buildDirErr  error
	buildDirMu   sync.Mutex // Main's removal against a late build
)

// owner returns this process's pid and start time (clock ticks since
// boot; 0 where there is no /proc).
func owner() (pid int, start uint64) {
	return os.Getpid(), startTime(os.Getpid())
}

// startTime returns the start time of process pid from /proc, 0 when it
// cannot be read.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	var st procfs.Stat
	if procfs.ParseStat(b, &st) != nil {
		return 0
	}
	return st.StartTime
}

// alive reports whether the process that made a build directory, pid with
// start time start, may still run: without /proc (start 0), whether any
// process has the pid.
func alive(pid int, start uint64) bool {
	if start == 0 {
		err := syscall.Kill(pid, 0)
		return err == nil || err == syscall.EPERM
	}
	return startTime(pid) == start
}

// ownedByMe reports whether fi belongs to this process's effective user.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// sweepStale removes the build directories of test binaries that have
// ended. Only directories owned by this user are touched.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, d := range dirs {
		f := strings.SplitN(strings.TrimPrefix(filepath.Base(d), buildPrefix), "-", 3)
		if len(f) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil || alive(pid, start) {
			continue
		}
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || !ownedByMe(fi) {
			continue
		}
		os.RemoveAll(d)
	}
}

// buildDir returns this test binary's build directory, made on first use.
func buildDir() (string, error) {
	buildDirOnce.Do(func() {
		pid, start := owner()
		sweepStale()
		buildDirMu.Lock()
		defer buildDirMu.Unlock()
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%d-", buildPrefix, pid, start))
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		buildDirPath, buildDirErr = dir, err
	})
	buildDirMu.Lock()
	defer buildDirMu.Unlock()
	if buildDirErr == nil && buildDirPath == "" {
		return "", errors.New("the build directory was removed (testenv.Main has run)")
	}
	return buildDirPath, buildDirErr
}

// BuildDir returns a directory, every user may traverse, for programs a
// test builds once per test binary; Main removes it.
func BuildDir(t testing.TB) string {
	t.Helper()
	dir, err := buildDir()
	if err != nil {
		t.Fatalf("build directory: %v", err)
	}
	return dir
}

// Main runs the tests of a package whose tests build programs (through
// BuildDir or a helper that compiles one), removes what they built, and
// returns the exit code: call it from TestMain as os.Exit(testenv.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	RemoveBuilt()
	return code
}

// RemoveBuilt removes this test binary's build directory, if it made one.
func RemoveBuilt() {
	buildDirMu.Lock()
	defer buildDirMu.Unlock()
	if buildDirPath != "" {
		os.RemoveAll(buildDirPath)
		buildDirPath = ""
	}
}
