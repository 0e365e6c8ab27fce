package proccon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

const helperEnv = "PROCCON_TEST_HELPER"

func init() {
	if os.Getenv(helperEnv) != "" {
		// Keep the main thread for the main goroutine, so the thread the
		// helper lets exit is never the main thread (which Go cannot end).
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "threads" {
		threadsHelper()
		return
	}
	os.Exit(testenv.Main(m))
}

// threadsHelper runs in a child process: it starts an OS thread that exits
// (a goroutine locked to its thread returns without unlocking), prints that
// thread's id once it is gone, waits for stdin to close and exits with 3.
func threadsHelper() {
	tids := make(chan int)
	go func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		// Returning while locked makes the runtime terminate the thread.
	}()
	tid := <-tids
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	if !testenv.Poll(10*time.Second, func() bool { _, err := os.Stat(task); return errors.Is(err, os.ErrNotExist) }) {
		fmt.Println("thread did not exit")
		os.Exit(1)
	}
	fmt.Println(tid)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(3)
}

// openSource opens a Source on the live kernel, skipping (or failing in CI)
// where the mechanism cannot run. A watchdog closes it if a test waits far
// too long for an event, so a broken test fails instead of hanging.
func openSource(t *testing.T) (*Source, procfs.BootID) {
	t.Helper()
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(boot)
	if errors.Is(err, events.ErrUnavailable) {
		testenv.Skip(t, "proc connector: %v", err)
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	watchdog := time.AfterFunc(2*time.Minute, func() { s.Close() })
	t.Cleanup(func() {
		watchdog.Stop()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, boot
}

// readUntil reads events, keeps those for which keep returns true, and
// stops at the first for which done returns true (that one included).
func readUntil(t *testing.T, s *Source, keep, done func(*events.Event) bool) []events.Event {
	t.Helper()
	var got []events.Event
	var ev events.Event
	for {
		if err := s.Read(&ev); err != nil {
			t.Fatalf("Read: %v (events so far: %+v)", err, got)
		}
		if ev.Mechanism != events.Netlink {
			t.Fatalf("event %+v: Mechanism = %q, want %q", ev, ev.Mechanism, events.Netlink)
		}
		if ev.Kind == events.Lost {
			t.Logf("lost %d events (machine busy)", ev.Count)
			continue
		}
		if keep(&ev) {
			got = append(got, ev)
		}
		if done(&ev) {
			return got
		}
	}
}

func isExitOf(pid int) func(*events.Event) bool {
	return func(ev *events.Event) bool { return ev.Kind == events.Exit && ev.Pid == int32(pid) }
}

func TestIntegrationForkExecExit(t *testing.T) {
	s, boot := openSource(t)
	cmd := exec.Command("/bin/cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	h, err := pidfd.Open(int32(pid), boot)
	if err != nil {
		t.Fatalf("pidfd.Open(%d): %v", pid, err)
	}
	defer h.Close()

	// The child is alive (blocked on stdin) while its fork and exec events
	// are handled, so its token can be proven.
	mine := func(ev *events.Event) bool { return ev.Pid == int32(pid) }
	got := readUntil(t, s, mine, func(ev *events.Event) bool { return ev.Kind == events.Exec && ev.Pid == int32(pid) })
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cat: %v", err)
	}
	got = append(got, readUntil(t, s, mine, isExitOf(pid))...)

	if len(got) != 3 {
		t.Fatalf("events for pid %d = %+v, want fork, exec, exit", pid, got)
	}
	fork, execEv, exit := got[0], got[1], got[2]
	want := h.Token()
	if fork.Kind != events.Fork || fork.PPid != int32(os.Getpid()) {
		t.Errorf("fork = %+v, want Fork with PPid %d", fork, os.Getpid())
	}
	if fork.Token != want {
		t.Errorf("fork token = %v, want %v (pidfd.Open)", fork.Token, want)
	}
	if fork.Token.Start != want.Start {
		t.Errorf("fork token start = %d ticks, want %d", fork.Token.Start, want.Start)
	}
	if execEv.Kind != events.Exec || execEv.Token != want || execEv.CommString() != "cat" || execEv.PPid != int32(os.Getpid()) {
		t.Errorf("exec = %+v (comm %q), want Exec of cat with token %v and PPid %d", execEv, execEv.CommString(), want, os.Getpid())
	}
	if code, ok := exit.Exited(); exit.Kind != events.Exit || !ok || code != 0 || exit.PPid != int32(os.Getpid()) {
		t.Errorf("exit = %+v, want Exit with code 0 and PPid %d", exit, os.Getpid())
	}
	if !exit.Token.IsZero() {
		t.Errorf("exit token = %v, want zero (unproven)", exit.Token)
	}
	if !(fork.Time <= execEv.Time && execEv.Time <= exit.Time) || fork.Time == 0 {
		t.Errorf("times fork %d, exec %d, exit %d: want non-zero and ordered", fork.Time, execEv.Time, exit.Time)
	}
	// Event time is boot time: the fork cannot be before the child started.
	if startNs := want.Start * tickNs; fork.Time < startNs {
		t.Errorf("fork time %d ns before the child's start %d ns", fork.Time, startNs)
	}
}

func TestIntegrationStartedBeforeFirstRead(t *testing.T) {
	s, _ := openSource(t)
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("sh: %v, want exit status 7", err)
	}
	pid := cmd.Process.Pid
	got := readUntil(t, s, func(ev *events.Event) bool { return ev.Pid == int32(pid) }, isExitOf(pid))
	var kinds []events.Kind
	for _, ev := range got {
		kinds = append(kinds, ev.Kind)
	}
	if fmt.Sprint(kinds) != "[fork exec exit]" {
		t.Fatalf("kinds for pid %d = %v, want [fork exec exit]", pid, kinds)
	}
	// The child was gone (reaped) before its fork was handled: no token can
	// be proven for it.
	if !got[0].Token.IsZero() {
		t.Errorf("fork token of a reaped child = %v, want zero", got[0].Token)
	}
	if code, ok := got[2].Exited(); !ok || code != 7 {
		t.Errorf("exit status %#x: code %d, %v, want 7", got[2].Status, code, ok)
	}
}

func TestIntegrationDoubleForkNamesBirthParent(t *testing.T) {
	s, boot := openSource(t)
	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 >/dev/null 2>&1 </dev/null & echo $!")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sh := cmd.Process.Pid
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sh output %q: %v", out, err)
	}
	t.Cleanup(func() {
		if h, err := pidfd.Open(int32(grandchild), boot); err == nil {
			h.Signal(unix.SIGKILL)
			h.Close()
		}
	})
	got := readUntil(t, s, func(ev *events.Event) bool { return ev.Kind == events.Fork && ev.Pid == int32(grandchild) },
		func(ev *events.Event) bool { return ev.Kind == events.Fork && ev.Pid == int32(grandchild) })
	if got[0].PPid != int32(sh) {
		t.Errorf("grandchild fork PPid = %d, want the shell %d (birth parent), not today's parent", got[0].PPid, sh)
	}
	// The shell has exited and the grandchild was reparented: its token can
	// only be proven if the read raced ahead of the shell's exit.
	if !got[0].Token.IsZero() {
		h, err := pidfd.Open(int32(grandchild), boot)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if got[0].Token != h.Token() {
			t.Errorf("grandchild token = %v, want zero or %v", got[0].Token, h.Token())
		}
	}
}

func TestIntegrationThreadsAreNotProcesses(t *testing.T) {
	s, _ := openSource(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=threads")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	tid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper output %q: %v", line, err)
	}
	stdin.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("helper: %v, want exit status 3", err)
	}
	pid := cmd.Process.Pid

	// A marker process started after the helper was reaped: reading up to
	// its exit drains every event of the helper's threads.
	marker := exec.Command("/bin/true")
	if err := marker.Run(); err != nil {
		t.Fatal(err)
	}
	related := func(ev *events.Event) bool {
		return ev.Pid == int32(pid) || ev.Pid == int32(tid) || ev.PPid == int32(pid)
	}
	got := readUntil(t, s, related, isExitOf(marker.Process.Pid))
	var forks, exits int
	for _, ev := range got {
		switch {
		case ev.Pid == int32(tid):
			t.Errorf("event %+v for thread %d, want none", ev, tid)
		case ev.Kind == events.Fork && ev.PPid == int32(pid):
			t.Errorf("fork %+v with the helper as parent: a thread reported as a process", ev)
		case ev.Kind == events.Fork && ev.Pid == int32(pid):
			forks++
		case ev.Kind == events.Exit && ev.Pid == int32(pid):
			exits++
			if code, ok := ev.Exited(); !ok || code != 3 {
				t.Errorf("helper exit status %#x, want code 3", ev.Status)
			}
		}
	}
	if forks != 1 || exits != 1 {
		t.Errorf("helper %d: %d fork and %d exit events, want 1 and 1 (events: %+v)", pid, forks, exits, got)
	}
}

// readAll reads and discards events until Read fails, and sends that error.
func readAll(s *Source) <-chan error {
	errc := make(chan error, 1)
	go func() {
		var ev events.Event
		for {
			if err := s.Read(&ev); err != nil {
				errc <- err
				return
			}
		}
	}()
	return errc
}

func TestIntegrationCloseUnblocksRead(t *testing.T) {
	s, _ := openSource(t)
	errc := readAll(s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, events.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	var ev events.Event
	if err := s.Read(&ev); !errors.Is(err, events.ErrClosed) {
		t.Errorf("second Read after Close = %v, want ErrClosed", err)
	}
}

// A CAP_NET_ADMIN process can send to a connector socket: a forged event
// that copies the kernel's headers exactly is still rejected, by the
// sender's port id.
func TestIntegrationForgedSenderDropped(t *testing.T) {
	s, _ := openSource(t)
	forger, err := netlink.Dial(unix.NETLINK_CONNECTOR, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	const fakePid = 4_000_001
	forged := appendEvent(nil, &rawEvent{what: whatFork, ts: 1, data: [6]uint32{
		forkParentPid: 1, forkParentTgid: 1, forkChildPid: fakePid, forkChildTgid: fakePid,
	}}, 0)
	rc, err := forger.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Sendto(int(fd), forged, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: s.pid()})
	}); err != nil || serr != nil {
		t.Fatalf("send forged event: %v, %v", err, serr)
	}
	marker := exec.Command("/bin/true")
	if err := marker.Run(); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, s, func(ev *events.Event) bool { return ev.Pid == fakePid }, isExitOf(marker.Process.Pid))
	if len(got) != 0 {
		t.Errorf("forged events delivered: %+v", got)
	}
	if n := s.Stats().DecodeErrors; n < 1 {
		t.Errorf("DecodeErrors = %d, want >= 1", n)
	}
}

func TestIntegrationOverflowReportsLoss(t *testing.T) {
	s, _ := openSource(t)
	// Shrink the buffer to its minimum so a few dozen processes overflow it.
	if err := s.k.setReadBuffer(1); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	var ev events.Event
	for {
		if err := s.Read(&ev); err != nil {
			t.Fatalf("Read: %v", err)
		}
		if ev.Kind == events.Lost {
			break
		}
	}
	st := s.Stats()
	if ev.Count == 0 || st.LostReports != 1 || st.Lost < ev.Count {
		t.Errorf("Lost event Count %d, stats %+v: want Count > 0, one report, Lost >= Count", ev.Count, st)
	}
	if err := s.k.setReadBuffer(rcvBuf); err != nil {
		t.Fatal(err)
	}
	// Reading goes on after the loss.
	marker := exec.Command("/bin/true")
	if err := marker.Run(); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, s, isExitOf(marker.Process.Pid), isExitOf(marker.Process.Pid))
	if len(got) != 1 {
		t.Errorf("after the loss: %+v, want the marker's exit", got)
	}
}

// The kernel receive path (recvfrom through the RawConn into the reused
// buffer, with the sender's address) allocates nothing.
func TestIntegrationReceiveDoesNotAllocate(t *testing.T) {
	s, _ := openSource(t)
	forger, err := netlink.Dial(unix.NETLINK_CONNECTOR, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	rc, err := forger.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// Queue enough datagrams that no receive below has to wait.
	b := appendEvent(nil, ptr(fork(1, 1, 4_000_001, 4_000_001)), 0)
	var serr error
	if err := rc.Control(func(fd uintptr) {
		to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: s.pid()}
		for range 300 {
			if serr = unix.Sendto(int(fd), b, 0, to); serr != nil {
				return
			}
		}
	}); err != nil || serr != nil {
		t.Fatalf("queue datagrams: %v, %v", err, serr)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := s.receive(true); err != nil {
			t.Fatalf("receive: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("receive allocates %v times per datagram, want 0", allocs)
	}
}
