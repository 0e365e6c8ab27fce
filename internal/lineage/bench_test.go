package lineage

import (
	"runtime"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// BenchmarkApply measures the hot path in steady state: fork and exit
// events (one per op) of short-lived children of a live parent, with the
// exited retention full, so every fork recycles an evicted slot.
func BenchmarkApply(b *testing.B) {
	g := newTestGraph(newClock(), Config{MaxExited: 4096})
	parent := tk(1, 1)
	g.Seed([]events.Proc{proc(1, parent, 0, token.Token{})})
	const pids = 32768
	var f, e events.Event
	step := func(k int) {
		pid := int32(2 + k%pids)
		tok := tk(uint64(10+k), uint64(10+k))
		if k%2 == 0 {
			f = fork(pid, tok, 1, parent, uint64(k)*1000)
			g.Apply(&f)
		} else {
			e = exit(pid, tk(uint64(10+k-1), uint64(10+k-1)), 0, uint64(k)*1000)
			e.Pid = int32(2 + (k-1)%pids)
			g.Apply(&e)
		}
	}
	for k := range 4 * pids { // warm up: fill retention and the pid map
		step(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for k := 4 * pids; b.Loop(); k++ {
		step(k)
	}
}

func liveGraph(tb testing.TB, n int) *Graph {
	g := newTestGraph(newClock(), Config{})
	parent := tk(1, 1)
	g.Seed([]events.Proc{proc(1, parent, 0, token.Token{})})
	for k := range n {
		f := fork(int32(2+k), tk(uint64(100+k), uint64(100+k)), 1, parent, 0)
		g.Apply(&f)
	}
	return g
}

func BenchmarkFind(b *testing.B) {
	const n = 100_000
	g := liveGraph(b, n)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		if _, _, ok := g.Find(int32(2+k%n), tk(uint64(100+k%n), uint64(100+k%n))); !ok {
			b.Fatal("not found")
		}
		k++
	}
}

func BenchmarkWatch(b *testing.B) {
	const n = 100_000
	g := liveGraph(b, n)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		if _, ok := g.Watch(int32(2+k%n), tk(uint64(100+k%n), uint64(100+k%n))); !ok {
			b.Fatal("not found")
		}
		k++
	}
}

// BenchmarkMemory reports the heap the graph holds per live process, for
// 100k processes inserted by fork events.
func BenchmarkMemory(b *testing.B) {
	const n = 100_000
	perProc := heapPerProcess(b, n, func() *Graph { return liveGraph(b, n) })
	b.ReportMetric(perProc, "bytes/process")
}

// heapPerProcess returns the heap a graph built by build holds per process,
// for n processes.
func heapPerProcess(b *testing.B, n int, build func() *Graph) float64 {
	var perProc float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g := build()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perProc = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		runtime.KeepAlive(g)
	}
	return perProc
}

// BenchmarkApplyStorm measures an exec storm through the graph: per op one
// child's fork, exec and exit, at pids handed out in turn over a window of
// 32768 (each pid reused, as the kernel's allocator wraps), children of one
// live parent, with the retention full.
func BenchmarkApplyStorm(b *testing.B) {
	g := newTestGraph(newClock(), Config{})
	parent := tk(1, 1)
	g.Seed([]events.Proc{proc(1, parent, 0, token.Token{})})
	const pids = 32768
	var f, x, e events.Event
	step := func(k int) {
		pid := int32(300 + k%pids)
		tok := tk(uint64(10+k), uint64(10+k))
		t := uint64(k) * 3000
		f = fork(pid, tok, 1, parent, t)
		f.Ctx = events.Context{Valid: true, SID: 1, PGID: 1, UID: 1000}
		g.Apply(&f)
		x = execEv(pid, tok, "worker")
		x.Time, x.PPid, x.ParentToken, x.Ctx = t+1000, 1, parent, f.Ctx
		g.Apply(&x)
		e = exit(pid, tok, 0, t+2000)
		g.Apply(&e)
	}
	for k := range 2 * pids { // warm up: fill retention and the pid index
		step(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for k := 2 * pids; b.Loop(); k++ {
		step(k)
	}
}

// BenchmarkComm: the parent's name looked up for an event (the tracker
// does it for every event it describes).
func BenchmarkComm(b *testing.B) {
	g := newTestGraph(newClock(), Config{})
	parent := tk(500, 900)
	apply(g, fork(4242, parent, 1, token.Token{}, 5*sec))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := g.Comm(4242, parent); !ok {
			b.Fatal("no comm")
		}
	}
}
