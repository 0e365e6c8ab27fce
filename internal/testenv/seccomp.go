package testenv

import (
	_ "embed"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed testdata/seccompcaller.c
var seccompCallerSource []byte

var (
	seccompCallerOnce sync.Once
	seccompCallerPath string
	seccompCallerErr  error
)

// The modes of SeccompCaller.
const (
	SeccompDeny   = ""       // a filter refusing mkdir and mkdirat (EOPNOTSUPP)
	SeccompStrict = "strict" // seccomp's strict mode
	// SeccompFake is SeccompDeny with the calls that change ids and
	// capabilities (setresuid, setresgid, setgroups, capset, capget,
	// prctl) answered 0 without being run.
	SeccompFake = "fake"
	// SeccompVfork is SeccompDeny with the process then waiting on a
	// vfork child that sleeps: in uninterruptible sleep, which no ptrace
	// stop interrupts.
	SeccompVfork = "vfork"
	// SeccompNoSeccomp is SeccompDeny under a first filter that refuses
	// seccomp(2) itself (the second is attached with prctl).
	SeccompNoSeccomp = "noseccomp"
	// SeccompNoSeccompExit is SeccompNoSeccomp with the first filter
	// refusing exit and exit_group too.
	SeccompNoSeccompExit = "noseccompexit"
	// SeccompNoExec is a filter refusing execve, execveat and every way
	// to exit or be sent a signal but SIGKILL.
	SeccompNoExec = "noexec"
	// SeccompKillExec and SeccompTrapExec are filters that kill the
	// process (SECCOMP_RET_KILL_PROCESS) or trap (SECCOMP_RET_TRAP: a
	// SIGSYS) at execve and execveat.
	SeccompKillExec = "killexec"
	SeccompTrapExec = "trapexec"
	// SeccompMute is a filter refusing execve, execveat, write, exit and
	// exit_group: a shim under it can neither exec nor say why nor exit.
	SeccompMute = "mute"
)

// SeccompCaller starts a process in seccomp mode mode
// (testdata/seccompcaller.c), as uid and gid when uid >= 0, and returns its
// pid once it is so. It needs root (it starts as root and drops); it is
// killed when the test ends.
func SeccompCaller(t testing.TB, uid, gid int, mode string) int {
	t.Helper()
	RequireRoot(t)
	seccompCallerOnce.Do(func() {
		seccompCallerPath, seccompCallerErr = compile("seccompcaller", seccompCallerSource)
	})
	if seccompCallerErr != nil {
		Skip(t, "cannot build the seccomp helper: %v", seccompCallerErr)
	}
	var args []string
	if mode != SeccompDeny {
		args = append(args, mode)
	}
	if uid >= 0 {
		args = append(args, strconv.Itoa(uid), strconv.Itoa(gid))
	}
	cmd := exec.Command(seccompCallerPath, args...)
	cmd.Stderr = os.Stderr
	startSaysPid(t, cmd)
	pid := cmd.Process.Pid
	// It prints its pid just before it enters the filter: wait for it.
	want := "Seccomp:\t2"
	if mode == SeccompStrict {
		want = "Seccomp:\t1"
	}
	Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		return strings.Contains(string(b), "\n"+want+"\n")
	}, "the seccomp helper did not enter its filter")
	return pid
}
