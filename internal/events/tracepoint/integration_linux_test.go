//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// waitLimit only keeps a broken test from hanging; nothing asserts on time.
const waitLimit = 60 * time.Second

// openSource loads the programs for a test, or skips (fails in CI) when the
// kernel cannot run them.
func openSource(t testing.TB) (*Source, procfs.BootID) {
	t.Helper()
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatalf("ReadBootID: %v", err)
	}
	s, err := New(boot)
	if errors.Is(err, events.ErrUnavailable) {
		testenv.Skip(t, "cannot load eBPF: %v", err)
	}
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return s, boot
}

// collector reads every event the source delivers into a list the test
// searches. Other packages' tests create processes meanwhile, so tests
// filter by the pids they created.
type collector struct {
	src    *Source
	mu     sync.Mutex
	evs    []events.Event
	notify chan struct{}
	done   chan error
}

func collect(t testing.TB, s *Source) *collector {
	c := &collector{src: s, notify: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		for {
			var ev events.Event
			if err := s.Read(&ev); err != nil {
				c.done <- err
				return
			}
			c.mu.Lock()
			c.evs = append(c.evs, ev.Clone()) // its strings live until the next Read
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if err := <-c.done; !errors.Is(err, events.ErrClosed) {
			t.Errorf("Read() after Close = %v, want ErrClosed", err)
		}
	})
	return c
}

// waitFor returns the first event matching match, failing the test if the
// source never delivers one.
func (c *collector) waitFor(t testing.TB, what string, match func(*events.Event) bool) events.Event {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		for i := range c.evs {
			if match(&c.evs[i]) {
				ev := c.evs[i]
				c.mu.Unlock()
				return ev
			}
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case err := <-c.done:
			t.Fatalf("waiting for %s: Read() = %v", what, err)
		case <-deadline.C:
			c.mu.Lock()
			n := len(c.evs)
			c.mu.Unlock()
			t.Fatalf("no %s among %d events (stats %+v)", what, n, c.src.Stats())
		}
	}
}

// all returns the events matching match seen so far.
func (c *collector) all(match func(*events.Event) bool) []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.Event
	for i := range c.evs {
		if match(&c.evs[i]) {
			out = append(out, c.evs[i])
		}
	}
	return out
}

// barrier runs a short process to completion and waits for its exit event.
// Records are ordered in the ring buffer, so once it shows, every event of
// processes that were reaped before it was started is in too.
func (c *collector) barrier(t testing.TB) {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	pid := int32(cmd.Process.Pid)
	c.waitFor(t, "barrier exit", is(events.Exit, pid))
}

func is(kind events.Kind, pid int32) func(*events.Event) bool {
	return func(ev *events.Event) bool { return ev.Kind == kind && ev.Pid == pid }
}

// helperPath builds testdata/helper.c.
func helperPath(t testing.TB) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Skip(t, "no gcc to build the thread helper: %v", err)
	}
	out := filepath.Join(t.TempDir(), "helper")
	if b, err := exec.Command(gcc, "-O2", "-Wall", "-pthread", "-o", out, "testdata/helper.c").CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v\n%s", err, b)
	}
	return out
}

func selfToken(t testing.TB, boot procfs.BootID) token.Token {
	t.Helper()
	h, err := pidfd.Open(int32(os.Getpid()), boot)
	if err != nil {
		t.Fatalf("pidfd.Open(self): %v", err)
	}
	defer h.Close()
	return h.Token()
}

// TestIntegrationLifecycle runs real children and checks their fork, exec
// and exit events: pid, parent, tokens equal to pidfd.Open's and to
// /proc's start ticks, and the exit status.
func TestIntegrationLifecycle(t *testing.T) {
	s, boot := openSource(t)
	c := collect(t, s)
	self := int32(os.Getpid())
	selfTok := selfToken(t, boot)

	tests := []struct {
		name   string
		argv   []string
		end    func(cmd *exec.Cmd, stdin io.WriteCloser) error
		exited int // exit code, or -1
		signal syscall.Signal
	}{
		{
			name: "exit 3",
			argv: []string{"/bin/sh", "-c", "read x; exit 3"},
			end: func(_ *exec.Cmd, stdin io.WriteCloser) error {
				_, err := io.WriteString(stdin, "go\n")
				return err
			},
			exited: 3,
		},
		{
			name:   "SIGKILL",
			argv:   []string{"/bin/sh", "-c", "read x"},
			end:    func(cmd *exec.Cmd, _ io.WriteCloser) error { return cmd.Process.Kill() },
			exited: -1,
			signal: syscall.SIGKILL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(tt.argv[0], tt.argv[1:]...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := int32(cmd.Process.Pid)
			fork := c.waitFor(t, "fork", is(events.Fork, pid))
			exe := c.waitFor(t, "exec", is(events.Exec, pid))

			// The process is alive (blocked in read): bind a pidfd and
			// compare identities.
			h, err := pidfd.Open(pid, boot)
			if err != nil {
				t.Fatalf("pidfd.Open(%d): %v", pid, err)
			}
			want := h.Token()
			st := h.Stat()
			h.Close()
			if want.Ino == 0 {
				t.Errorf("pidfd token %v has no pidfs inode on a pidfs kernel", want)
			}
			for _, ev := range []events.Event{fork, exe} {
				if ev.Token != want {
					t.Errorf("%v token = %v, want pidfd.Open's %v", ev.Kind, ev.Token, want)
				}
				if ev.Token.Start != st.StartTime {
					t.Errorf("%v start ticks = %d, want /proc/%d/stat field 22 = %d", ev.Kind, ev.Token.Start, pid, st.StartTime)
				}
				if ev.PPid != self || ev.ParentToken != selfTok {
					t.Errorf("%v parent = %d %v, want %d %v", ev.Kind, ev.PPid, ev.ParentToken, self, selfTok)
				}
				if ev.Mechanism != events.EBPF || ev.Time == 0 {
					t.Errorf("%v mechanism %q time %d, want ebpf and a time", ev.Kind, ev.Mechanism, ev.Time)
				}
			}
			if got := exe.CommString(); got != "sh" {
				t.Errorf("exec comm = %q, want sh", got)
			}

			if err := tt.end(cmd, stdin); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			exit := c.waitFor(t, "exit", is(events.Exit, pid))
			if exit.Token != want || exit.PPid != self {
				t.Errorf("exit token %v parent %d, want %v %d", exit.Token, exit.PPid, want, self)
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if exit.Status != uint32(ws) {
				t.Errorf("exit status = %#x, want wait(2)'s %#x", exit.Status, uint32(ws))
			}
			if tt.exited >= 0 {
				if code, ok := exit.Exited(); !ok || code != tt.exited {
					t.Errorf("Exited() = %d, %v, want %d, true", code, ok, tt.exited)
				}
			} else if sig, ok := exit.Signaled(); !ok || syscall.Signal(sig) != tt.signal {
				t.Errorf("Signaled() = %d, %v, want %d, true", sig, ok, tt.signal)
			}
		})
	}
}

// TestIntegrationDoubleFork checks that a double-forked grandchild's fork
// event names its birth parent, though by its exit it has been reparented.
func TestIntegrationDoubleFork(t *testing.T) {
	helper := helperPath(t)
	s, _ := openSource(t)
	c := collect(t, s)

	cmd := exec.Command(helper, "double-fork")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read grandchild pid: %v", err)
	}
	gc64, err := strconv.ParseInt(strings.TrimSpace(line), 10, 32)
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	gc := int32(gc64)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	top := int32(cmd.Process.Pid)

	mid := c.waitFor(t, "fork of the middle child", func(ev *events.Event) bool {
		return ev.Kind == events.Fork && ev.PPid == top
	})
	gcFork := c.waitFor(t, "fork of the grandchild", is(events.Fork, gc))
	if gcFork.PPid != mid.Pid || gcFork.ParentToken != mid.Token {
		t.Errorf("grandchild fork parent = %d %v, want the middle child %d %v", gcFork.PPid, gcFork.ParentToken, mid.Pid, mid.Token)
	}
	gcExit := c.waitFor(t, "exit of the grandchild", is(events.Exit, gc))
	if gcExit.PPid == mid.Pid {
		t.Errorf("grandchild exit parent = %d, the middle child that had exited", gcExit.PPid)
	}
	if code, ok := gcExit.Exited(); !ok || code != 7 {
		t.Errorf("grandchild Exited() = %d, %v, want 7, true", code, ok)
	}
	if gcExit.Token != gcFork.Token {
		t.Errorf("grandchild exit token %v, fork token %v", gcExit.Token, gcFork.Token)
	}
}

// TestIntegrationThreads checks that threads are not processes: exec from a
// non-leader thread is reported for the tgid, thread creation and exit make
// no fork or exit event, and the exit comes once, from the last thread.
func TestIntegrationThreads(t *testing.T) {
	helper := helperPath(t)
	s, _ := openSource(t)
	c := collect(t, s)

	tests := []struct {
		name      string
		args      []string
		wantExec  int  // exec events for the pid
		execByTid bool // the exec came from a non-leader thread
		exitCode  int
		exitByTid bool // the last thread was not the leader
	}{
		{name: "exec from a non-leader thread", args: []string{"thread-exec"}, wantExec: 2, execByTid: true, exitCode: 5},
		{name: "threads come and go", args: []string{"threads", "8"}, wantExec: 1, exitCode: 0},
		{name: "leader exits first", args: []string{"leader-first"}, wantExec: 1, exitCode: 4, exitByTid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(helper, tt.args...)
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if got := cmd.ProcessState.ExitCode(); got != tt.exitCode {
				t.Fatalf("helper %v exit code %d, want %d", tt.args, got, tt.exitCode)
			}
			pid := int32(cmd.Process.Pid)
			c.barrier(t)

			forks := c.all(is(events.Fork, pid))
			childForks := c.all(func(ev *events.Event) bool { return ev.Kind == events.Fork && ev.PPid == pid })
			execs := c.all(is(events.Exec, pid))
			exits := c.all(is(events.Exit, pid))
			if len(forks) != 1 || len(childForks) != 0 {
				t.Errorf("forks of %d = %d, forks by it = %d; want 1, 0 (threads are not processes)", pid, len(forks), len(childForks))
			}
			if len(execs) != tt.wantExec {
				t.Fatalf("exec events for %d = %d, want %d", pid, len(execs), tt.wantExec)
			}
			last := execs[len(execs)-1]
			if tt.execByTid && (last.Tid == 0 || last.Tid == pid) {
				t.Errorf("exec from a thread: Tid = %d, want the thread's id", last.Tid)
			}
			if len(exits) != 1 {
				t.Fatalf("exit events for %d = %d, want exactly 1", pid, len(exits))
			}
			ex := exits[0]
			if code, ok := ex.Exited(); !ok || code != tt.exitCode {
				t.Errorf("Exited() = %d, %v, want %d, true", code, ok, tt.exitCode)
			}
			if tt.exitByTid != (ex.Tid != 0) {
				t.Errorf("exit Tid = %d; last thread not the leader = %v", ex.Tid, tt.exitByTid)
			}
			for _, ev := range append(execs, ex) {
				if ev.Token != forks[0].Token {
					t.Errorf("%v token %v, fork token %v", ev.Kind, ev.Token, forks[0].Token)
				}
			}
		})
	}
}

// TestIntegrationBornBeforeFirstRead checks attach-then-drain: a process
// that lives and dies after New but before anything is read is delivered.
func TestIntegrationBornBeforeFirstRead(t *testing.T) {
	s, _ := openSource(t)
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := int32(cmd.Process.Pid)
	c := collect(t, s)
	c.waitFor(t, "fork", is(events.Fork, pid))
	c.waitFor(t, "exit", is(events.Exit, pid))
}

// TestIntegrationExecPath checks WithExecPath: exec events carry the path
// of the file the kernel ran (symlinks such as /bin -> usr/bin resolved).
func TestIntegrationExecPath(t *testing.T) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(boot, WithExecPath())
	if errors.Is(err, events.ErrUnavailable) {
		testenv.Skip(t, "cannot load eBPF: %v", err)
	}
	if err != nil {
		t.Fatalf("New(WithExecPath) = %v", err)
	}
	c := collect(t, s)
	cmd := exec.Command("/bin/sh", "-c", "exec /bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := int32(cmd.Process.Pid)
	c.waitFor(t, "exit", is(events.Exit, pid))
	var got []string
	for _, ev := range c.all(is(events.Exec, pid)) {
		got = append(got, ev.Exe)
	}
	want := []string{realPath(t, "/bin/sh"), realPath(t, "/bin/true")}
	if !equalSlices(got, want) {
		t.Errorf("exec paths = %q, want %q", got, want)
	}
	for _, ev := range c.all(is(events.Fork, pid)) {
		if ev.Exe != "" {
			t.Errorf("fork event with Exe %q", ev.Exe)
		}
	}
}

// TestIntegrationLostCounterNoAlloc checks that looking at the kernel's
// lost counter, which Read does whenever the buffer drains, does not
// allocate, and that the counter starts at zero.
func TestIntegrationLostCounterNoAlloc(t *testing.T) {
	s, _ := openSource(t)
	defer s.Close()
	n, err := s.lost()
	if err != nil || n != 0 {
		t.Fatalf("lost() = %d, %v, want 0, nil", n, err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = s.lost() }); a != 0 {
		t.Errorf("lost() allocates %v times", a)
	}
}

// BenchmarkForkStorm measures events per second delivered while a helper
// forks b.N short-lived children (64 alive at a time): each child is one
// fork and one exit event. Lost events, if the consumer falls behind, are
// reported as a metric.
func BenchmarkForkStorm(b *testing.B) {
	helper := helperPath(b)
	s, _ := openSource(b)
	defer s.Close()

	cmd, stdin := startStorm(b, helper, b.N)
	top := int32(cmd.Process.Pid)
	done := make(chan error, 1)
	var c stormCount
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() { done <- c.read(s, top, uint64(2*b.N)) }()
	if _, err := stdin.Write([]byte{1}); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("helper: %v", err)
	}
	b.ReportMetric(float64(c.mine)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(c.lost), "lost")
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "fork storm: %d events in %v, %d lost, stats %+v\n", c.mine, elapsed, c.lost, s.Stats())
	}
}

// startStorm starts the helper's storm of n forks, which begins at the
// first byte written to stdin.
func startStorm(tb testing.TB, helper string, n int) (*exec.Cmd, io.WriteCloser) {
	tb.Helper()
	cmd := exec.Command(helper, "storm", strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	return cmd, stdin
}

// stormCount counts what Read delivered of a helper's storm: its fork and
// exit records, and the records the kernel reported lost (anyone's).
type stormCount struct{ mine, lost, reports uint64 }

// read reads until want of the storm's records (those whose parent is top)
// are delivered or counted lost.
func (c *stormCount) read(s *Source, top int32, want uint64) error {
	var ev events.Event
	for c.mine+c.lost < want {
		if err := s.Read(&ev); err != nil {
			return err
		}
		switch {
		case ev.Kind == events.Lost:
			c.lost += ev.Count
			c.reports++
		case ev.PPid == top && (ev.Kind == events.Fork || ev.Kind == events.Exit):
			c.mine++
		}
	}
	return nil
}

// realPath resolves every symlink in p.
func realPath(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIntegrationWakeAfterQuiet checks the wake-up protocol: once the reader
// has gone quiet (it set reader_asleep and sleeps without a deadline), a
// single process still reaches it, because the program committing its first
// record sees the flag and wakes the reader. Records are otherwise
// submitted without waking it, so a broken protocol leaves the reader
// asleep and the test waiting. The reader goes quiet after 2 ms without
// a record here, not 200: other tests that fork on the same host (CI runs
// packages side by side) left no 200 ms gap in a minute.
func TestIntegrationWakeAfterQuiet(t *testing.T) {
	s, _ := openSource(t)
	if s.ready == nil {
		t.Fatal("the reader does not wait for the ring in the netpoller")
	}
	s.straggle = 2 * time.Millisecond
	c := collect(t, s)
	for i := range 3 {
		quiet := false
		for end := time.Now().Add(waitLimit); !quiet && time.Now().Before(end); {
			quiet = atomic.LoadUint32(s.asleep) == 1
			time.Sleep(100 * time.Microsecond)
		}
		if !quiet {
			t.Fatalf("round %d: the reader never went quiet (waited %v)", i, waitLimit)
		}
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		c.waitFor(t, "exit after a quiet stretch", is(events.Exit, int32(cmd.Process.Pid)))
	}
}

// TestIntegrationOverflowReported fills the ring buffer while nobody reads
// it (a storm of 20,000 forks, each a fork and an exit record, several
// times the ring), then reads: every record of the storm is delivered or
// counted lost, the losses come as Lost events, and the kernel's counter,
// read through its mapping, accounts for them.
func TestIntegrationOverflowReported(t *testing.T) {
	helper := helperPath(t)
	s, _ := openSource(t)
	defer s.Close()
	const n = 20000
	cmd, stdin := startStorm(t, helper, n)
	top := int32(cmd.Process.Pid)
	if _, err := stdin.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	var c stormCount
	done := make(chan error, 1)
	go func() { done <- c.read(s, top, 2*n) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		s.Close()
		<-done
		t.Fatalf("after 30 s: %d of the storm's %d records delivered, %d counted lost", c.mine, 2*n, c.lost)
	}
	kernel, err := s.lost()
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	// The kernel's counter may be ahead: drops not yet reported (Read
	// reports them once the ring drains), never behind.
	if c.lost == 0 || c.reports == 0 || st.Lost != c.lost || kernel < c.lost {
		t.Errorf("%d delivered, %d lost in %d reports; stats %+v; kernel counter %d: want losses, reported, the stats equal, the counter not behind",
			c.mine, c.lost, c.reports, st, kernel)
	}
}
