package main

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// restoreNofile gives this process back the soft RLIMIT_NOFILE it was
// started with, so that the daemon, which bounds a workload by its
// caller's limits as /proc shows them, sees the caller's own.
//
// Go's runtime raises a program's soft RLIMIT_NOFILE to its hard limit
// minus one at start (go.dev/issue/46279) and keeps the original only
// for the programs it execs itself. Without this, a workload started with
// `supervisor launch` from a shell with `ulimit -Sn 1024` got a soft limit
// of the hard one, where the same request from curl got 1024.
//
// The original is read from a child that runs this binary under
// PTRACE_TRACEME: the runtime sets the original limit back in the child
// before its execve, and the kernel stops the child right after it, before
// any of its code runs (and so before its runtime raises the limit again).
// The child is killed there. When the limit was not raised (soft not hard
// minus one) nothing is done; when the child cannot be started or traced
// (Yama's ptrace_scope 2 or 3 forbids PTRACE_TRACEME), the raised limit
// stays: a soft limit bounds nothing the workload could not raise itself.
func restoreNofile() {
	var cur unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &cur) != nil || cur.Max == 0 || cur.Cur != cur.Max-1 {
		return
	}
	orig, ok := startedNofile()
	if !ok || orig.Max != cur.Max || orig.Cur >= cur.Cur {
		return
	}
	// syscall.Setrlimit, not unix's: it also tells the runtime that the
	// limit is now this program's own choice.
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: orig.Cur, Max: cur.Max})
}

// startedNofile returns the RLIMIT_NOFILE a child of this process has at
// its first instruction: the one this process was started with.
func startedNofile() (unix.Rlimit, bool) {
	var l unix.Rlimit
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
	if cmd.Start() != nil {
		return l, false
	}
	err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &l)
	cmd.Process.Kill()
	cmd.Wait()
	return l, err == nil
}
