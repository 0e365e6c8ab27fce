package logfeed

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// bootNow reads CLOCK_BOOTTIME, the clock of events.Event.Time.
func bootNow(t *testing.T) uint64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// realEvents starts real processes and describes their lives as a source
// would: a child forked and exec'd into sleep and killed by SIGKILL, and a
// shell that exits with status 3. Tokens come from pidfds (start ticks and
// pidfs inode), exit statuses from wait.
func realEvents(t *testing.T) *procEvents {
	t.Helper()
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, err := pidfd.Open(int32(os.Getpid()), boot)
	if err != nil {
		testenv.Skip(t, "pidfd of self: %v", err)
	}
	defer self.Close()

	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	pe := &procEvents{argv: []string{sleep, "60"}, parent: self.Token()}
	pe.startedAfter = time.Now()
	cmd := exec.Command(sleep, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pe.startedBefore = time.Now()
	defer cmd.Process.Kill()
	pid := int32(cmd.Process.Pid)
	h, err := pidfd.Open(pid, boot)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pe.childPid, pe.child = pid, h.Token()
	// Wait for the exec to be done, to read the program's comm and path.
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	testenv.EventuallyNil(t, 10*time.Second, func() error {
		if err := r.ReadStat(pid, &st); err != nil {
			t.Fatal(err)
		}
		if st.CommString() != "sleep" {
			return fmt.Errorf("comm %q", st.CommString())
		}
		return nil
	}, "child %d never ran sleep", pid)
	if pe.exe, err = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil {
		t.Fatal(err)
	}
	selfStat := self.Stat()
	fork := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: pid, PPid: int32(os.Getpid()),
		Token: pe.child, ParentToken: pe.parent, Comm: selfStat.Comm, Time: bootNow(t)}
	execEv := fork
	execEv.Kind, execEv.Comm, execEv.Exe, execEv.Argv = events.Exec, st.Comm, pe.exe, pe.argv
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	exit := execEv
	exit.Kind, exit.Exe, exit.Argv, exit.Time = events.Exit, "", nil, bootNow(t)
	exit.Status = uint32(cmd.ProcessState.Sys().(syscall.WaitStatus))
	pe.killedBy = "SIGKILL"

	sh := exec.Command("/bin/sh", "-c", "exit 3")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	h2, err := pidfd.Open(int32(sh.Process.Pid), boot)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	sh.Wait()
	pe.exitCode = sh.ProcessState.ExitCode()
	exit2 := events.Event{Kind: events.Exit, Mechanism: events.Netlink, Pid: int32(sh.Process.Pid),
		PPid: int32(os.Getpid()), Token: h2.Token(), ParentToken: pe.parent,
		Status: uint32(sh.ProcessState.Sys().(syscall.WaitStatus)), Inferred: true}
	copy(exit2.Comm[:], "sh")
	pe.all = []events.Event{fork, execEv, exit, exit2}
	return pe
}
