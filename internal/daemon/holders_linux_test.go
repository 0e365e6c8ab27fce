package daemon

import (
	"maps"
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
	w, err := newHolderWatch(boot, nil, func(pid int32, tok token.Token) {
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
	start := func() (*exec.Cmd, token.Token) { return startHolder(t, boot) }

	a, atok := start()
	w.add(1000, int32(a.Process.Pid), atok)
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
	w.add(1000, int32(b.Process.Pid), other)
	if !exited(int32(b.Process.Pid)) {
		t.Error("a holder whose pid another instance holds was not reported at once")
	}

	c, ctok := start()
	w.add(1000, int32(c.Process.Pid), ctok)
	w.remove(int32(c.Process.Pid))
	c.Process.Kill()
	c.Wait()
	if testenv.Poll(300*time.Millisecond, func() bool { return exited(int32(c.Process.Pid)) }) {
		t.Error("the exit of a holder no longer watched was reported")
	}
}

// TestHolderWatchBudget: a uid's holders are watched up to its share of
// the descriptors, and all uids' but root's up to the total; a holder
// over it is counted unwatched; a holder's exit or removal gives its
// descriptor back to its uid; root's holders are not counted.
func TestHolderWatchBudget(t *testing.T) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	budget := &fdBudget{perUID: 2, total: 3, used: map[uint32]int{}}
	exits := make(chan int32, 16)
	w, err := newHolderWatch(boot, budget, func(pid int32, tok token.Token) { exits <- pid })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.run() }()
	defer func() { w.stop(); <-done; w.close() }()
	type holder struct {
		c   *exec.Cmd
		tok token.Token
	}
	start := func() holder {
		c, tok := startHolder(t, boot)
		return holder{c, tok}
	}
	pid := func(h holder) int32 { return int32(h.c.Process.Pid) }
	check := func(step string, watching int, failed uint64, used map[uint32]int) {
		t.Helper()
		n, f := w.stats()
		budget.mu.Lock()
		got := maps.Clone(budget.used)
		all := budget.all
		budget.mu.Unlock()
		sum := 0
		for _, v := range used {
			sum += v
		}
		if n != watching || f != failed || !maps.Equal(got, used) || all != sum {
			t.Fatalf("%s: watching %d, unwatched %d, charged %v (%d in all); want %d, %d, %v", step, n, f, got, all, watching, failed, used)
		}
	}
	var hs []holder
	for range 6 {
		hs = append(hs, start())
	}
	w.add(1000, pid(hs[0]), hs[0].tok)
	w.add(1000, pid(hs[1]), hs[1].tok)
	w.add(1000, pid(hs[1]), hs[1].tok) // the same holder again: no second descriptor
	check("uid 1000's share", 2, 0, map[uint32]int{1000: 2})
	w.add(1000, pid(hs[2]), hs[2].tok)
	check("over uid 1000's share", 2, 1, map[uint32]int{1000: 2})
	w.add(1001, pid(hs[2]), hs[2].tok)
	w.add(1002, pid(hs[3]), hs[3].tok)
	check("over the total", 3, 2, map[uint32]int{1000: 2, 1001: 1})
	w.add(0, pid(hs[4]), hs[4].tok)
	check("root", 4, 2, map[uint32]int{1000: 2, 1001: 1})

	hs[0].c.Process.Kill()
	select {
	case p := <-exits:
		if p != pid(hs[0]) {
			t.Fatalf("exit of %d reported, want %d", p, pid(hs[0]))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the exit of a watched holder was not reported")
	}
	check("after an exit", 3, 2, map[uint32]int{1000: 1, 1001: 1})
	w.remove(pid(hs[1]))
	check("after a removal", 2, 2, map[uint32]int{1001: 1})
	w.add(1002, pid(hs[5]), hs[5].tok)
	check("the total given back", 3, 2, map[uint32]int{1001: 1, 1002: 1})
}

// startHolder starts a sleep to stand for a holder, killed at the test's
// end, and returns it with its token.
func startHolder(t *testing.T, boot procfs.BootID) (*exec.Cmd, token.Token) {
	t.Helper()
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
