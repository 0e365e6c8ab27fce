//go:build linux

package lineage

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestIntegrationSeedFromProc seeds a graph from the real /proc and checks
// the test process, its parent and a child it starts, then resyncs after
// the child is killed and reaped. Reading /proc needs no privilege.
func TestIntegrationSeedFromProc(t *testing.T) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatalf("ReadBootID: %v", err)
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			child.Process.Kill()
			child.Wait()
		}
	})
	procs, err := events.Scan("/proc", boot)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	g := New(Config{Boot: boot})
	g.Seed(procs)

	r := procfs.NewReader("/proc")
	ticks := func(pid int) uint64 {
		var st procfs.Stat
		if err := r.ReadStat(int32(pid), &st); err != nil {
			t.Fatalf("ReadStat(%d): %v", pid, err)
		}
		return st.StartTime
	}
	self, parent, kid := os.Getpid(), os.Getppid(), child.Process.Pid
	for _, pid := range []int{self, parent, kid} {
		n, ok := g.Live(int32(pid))
		want := token.Token{Boot: boot, Start: ticks(pid), Prec: token.Ticks}
		if !ok || n.Token != want {
			t.Errorf("Live(%d) = %v, %v, want token %v", pid, n.Token, ok, want)
		}
		if ok && n.Flags.Has(BornObserved) {
			t.Errorf("Live(%d).Flags = %v: a seeded node's birth was not observed", pid, n.Flags)
		}
	}
	selfNode, _ := g.Live(int32(self))
	if selfNode.PPid != int32(parent) {
		t.Errorf("Live(self).PPid = %d, want %d", selfNode.PPid, parent)
	}
	d, err := g.Descendants(int32(self), selfNode.Token)
	if err != nil || !slices.Contains(pids(d), int32(kid)) {
		t.Errorf("Descendants(self) = %v, %v, want it to hold the sleep child %d", pids(d), err, kid)
	}
	a, err := g.Ancestors(int32(kid), token.Token{Boot: boot, Start: ticks(kid), Prec: token.Ticks})
	if err != nil || len(a) < 2 || a[0].Pid != int32(self) || a[1].Pid != int32(parent) {
		t.Errorf("Ancestors(child) = %v, %v, want [%d %d ...]", pids(a), err, self, parent)
	}
	kidTok := token.Token{Boot: boot, Start: ticks(kid), Prec: token.Ticks}

	child.Process.Kill()
	child.Wait()
	reaped = true
	procs, err = events.Scan("/proc", boot)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	g.Resync(procs)
	if err := g.check(); err != nil {
		t.Fatal(err)
	}
	n, _, ok := g.Find(int32(kid), kidTok)
	if !ok || !n.Flags.Has(Exited|ExitImplied) {
		t.Errorf("after resync: Find(child) = %+v, %v, want exit implied", n, ok)
	}
	if _, ok := g.Live(int32(self)); !ok {
		t.Errorf("after resync: Live(self) not found")
	}
}
