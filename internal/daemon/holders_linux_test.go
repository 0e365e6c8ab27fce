package daemon

import (
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestHolderWatch: the pidfd backstop reports a holder's exit with no
// event source at all, reports at once a holder already gone or whose pid
// another instance holds, and says nothing of a holder it stopped
// watching.
func TestHolderWatch(t *testing.T) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	exits := map[int32]token.Token{}
	w, err := newHolderWatch(boot, func(pid int32, tok token.Token) {
		mu.Lock()
		exits[pid] = tok
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.run() }()
	defer func() { w.stop(); <-done; w.close() }()
	exited := func(pid int32) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := exits[pid]
		return ok
	}
	start := func() (*exec.Cmd, token.Token) {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		h, err := pidfd.Open(int32(c.Process.Pid), boot)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		return c, h.Token()
	}

	a, atok := start()
	w.add(int32(a.Process.Pid), atok)
	if n, _ := w.stats(); n != 1 {
		t.Fatalf("watching %d holders, want 1", n)
	}
	a.Process.Kill()
	testenv.Eventually(t, 10*time.Second, func() bool { return exited(int32(a.Process.Pid)) }, "exit of holder %d not reported", a.Process.Pid)
	if n, _ := w.stats(); n != 0 {
		t.Errorf("still watching %d holders after the exit, want 0", n)
	}

	b, btok := start()
	other := btok
	other.Start++
	w.add(int32(b.Process.Pid), other)
	if !exited(int32(b.Process.Pid)) {
		t.Error("a holder whose pid another instance holds was not reported at once")
	}

	c, ctok := start()
	w.add(int32(c.Process.Pid), ctok)
	w.remove(int32(c.Process.Pid))
	c.Process.Kill()
	c.Wait()
	if testenv.Poll(300*time.Millisecond, func() bool { return exited(int32(c.Process.Pid)) }) {
		t.Error("the exit of a holder no longer watched was reported")
	}
}
