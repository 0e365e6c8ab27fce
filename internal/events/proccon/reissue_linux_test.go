package proccon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationExecNotGivenSuccessor: a process A at a chosen pid execs
// and exits, and the pid goes at once (clone3 set_tid) to a process B
// that pauses as a fresh fork of the helper, whose arguments it shows.
// Both start within a tick or two of A's exec, so the start time identify
// checks cannot tell them apart; the exec events are read only after B
// holds the pid. No exec of A may carry B's token (the tracker would
// describe A's exec with B's /proc: its parent's arguments): it carries
// none. A is forked while the source watches (its fork bound while it
// lives), or before the source opened (no fork seen).
func TestIntegrationExecNotGivenSuccessor(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("forkWatched=%v", watched), func(t *testing.T) { testExecNotGivenSuccessor(t, watched) })
	}
}

func testExecNotGivenSuccessor(t *testing.T, watched bool) {
	testenv.RequireRoot(t)
	for attempt := 0; attempt < 20; attempt++ {
		if tried := tryExecNotGivenSuccessor(t, watched); tried {
			return
		}
	}
	t.Fatal("20 attempts: never a successor within a tick of the exec")
}

// tryExecNotGivenSuccessor runs one attempt and reports whether it tested
// the case (a pid free to take, and B started within the tick of slack).
func tryExecNotGivenSuccessor(t *testing.T, watched bool) bool {
	free := exec.Command("/bin/true")
	if err := free.Run(); err != nil {
		t.Fatal(err)
	}
	pid := int32(free.Process.Pid)
	fifo := filepath.Join(t.TempDir(), "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("reissue-exec-%d", os.Getpid())
	script := "read x < " + fifo + "; exec /bin/true " + marker
	// A's helper starts B at A's pid as soon as A has exited: B must
	// start within a tick of A's exec, which a reissue from here (a wait
	// for the pid, a helper of its own) misses on a slow host.
	var a *testenv.Spawned
	spawnA := func() bool {
		var err error
		a, err = testenv.SpawnAtThen(t, pid, "/bin/sh", "-c", script)
		if errors.Is(err, testenv.ErrPidTaken) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	}
	if !watched && !spawnA() {
		return false
	}
	s, boot := openSource(t)
	defer s.Close()
	var evs []events.Event
	keep := func(ev *events.Event) bool { return ev.Pid == pid }
	if watched {
		if !spawnA() {
			return false
		}
		// A's fork and its shell's exec, read while A waits on the fifo.
		evs = readUntil(t, s, keep, func(ev *events.Event) bool { return ev.Kind == events.Exec && ev.Pid == pid })
		if evs[0].Kind != events.Fork || evs[0].Token.IsZero() || evs[1].Token != evs[0].Token {
			t.Fatalf("A's fork and exec read while A lives: %+v, want both with A's token", evs)
		}
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("\n")
	w.Close()
	err = a.Successor()
	if errors.Is(err, testenv.ErrPidTaken) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	h, err := pidfd.Open(pid, boot)
	if err != nil {
		t.Fatal(err)
	}
	bTok := h.Token()
	h.Close()
	// Up to B's fork: A's exec of true (and, unwatched, nothing before).
	evs = append(evs, readUntil(t, s, keep, func(ev *events.Event) bool { return ev.Kind == events.Fork && ev.Token == bTok })...)
	var execTrue *events.Event
	for i := range evs {
		ev := &evs[i]
		if ev.Kind == events.Exec && ev.Token == bTok {
			t.Errorf("exec of A at %d ns carries B's token %v (comm %q, ppid %d)", ev.Time, bTok, ev.CommString(), ev.PPid)
		}
		if ev.Kind == events.Exec {
			execTrue = ev
		}
	}
	if execTrue == nil {
		t.Fatalf("no exec of A in %+v", evs)
	}
	if bTok.Start > execTrue.Time/tickNs+1 {
		t.Logf("B started at tick %d, A's exec at %d ns: outside the slack, again", bTok.Start, execTrue.Time)
		return false
	}
	if !execTrue.Token.IsZero() && !(watched && execTrue.Token == evs[0].Token) {
		t.Errorf("exec of A carries token %v, want none (A is gone) or A's", execTrue.Token)
	}
	return true
}

// TestIntegrationAdoptedChildProven: a shell starts a child in the
// background and exits before the source reads the child's fork, so the
// child is no longer its parent's (init adopted it): no successor, since
// no exit of it is queued behind, which the look-ahead proves. Its fork
// and exec carry its token (before, neither did: a reparented child was
// as unproven as a successor). A busy host, whose queue the look-ahead
// cannot see whole, leaves them unproven: the attempt is made again.
func TestIntegrationAdoptedChildProven(t *testing.T) {
	s, boot := openSource(t)
	for attempt := 0; attempt < 10; attempt++ {
		cmd := exec.Command("/bin/sh", "-c", "sleep 1000 >/dev/null 2>&1 </dev/null & echo $!")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		var child int32
		if _, err := fmt.Sscan(string(out), &child); err != nil {
			t.Fatalf("sh output %q: %v", out, err)
		}
		h, err := pidfd.Open(child, boot)
		if err != nil {
			t.Fatal(err)
		}
		want := h.Token()
		t.Cleanup(func() { h.Signal(unix.SIGKILL); h.Close() })
		got := readUntil(t, s, func(ev *events.Event) bool { return ev.Pid == child },
			func(ev *events.Event) bool { return ev.Kind == events.Exec && ev.Pid == child })
		fork, execEv := got[0], got[len(got)-1]
		if fork.Kind != events.Fork || fork.PPid != int32(cmd.Process.Pid) {
			t.Fatalf("child's events %+v, want its fork by %d first", got, cmd.Process.Pid)
		}
		if fork.Token.IsZero() {
			t.Logf("attempt %d: the adopted child's fork unproven (a busy host?): again", attempt)
			continue
		}
		if fork.Token != want || execEv.Token != want {
			t.Errorf("adopted child: fork token %v, exec token %v, want %v", fork.Token, execEv.Token, want)
		}
		return
	}
	t.Fatal("10 attempts: the adopted child's fork never proven")
}
