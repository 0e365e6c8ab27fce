package pidtab

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkTable and BenchmarkMap run the same churn (a pid set, read
// twice, then deleted, over a moving window of 32768 pids) through a Table
// and through the map[int32]uint32 it replaces.
func BenchmarkTable(b *testing.B) {
	var t Table
	churn(b, t.Get, t.Set, t.Delete)
}

func BenchmarkMap(b *testing.B) {
	m := map[int32]uint32{}
	churn(b, func(pid int32) uint32 { return m[pid] },
		func(pid int32, v uint32) { m[pid] = v }, func(pid int32) { delete(m, pid) })
}

func churn(b *testing.B, get func(int32) uint32, set func(int32, uint32), del func(int32)) {
	const window = 32768
	const base = 300
	for k := range window {
		set(int32(base+k), uint32(k)|1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		pid := int32(base + (k+window)%(1<<16))
		set(pid, uint32(k)|1)
		if get(pid) == 0 || get(int32(base+(k+window/2)%(1<<16))) == 1<<31 {
			b.Fatal("lost")
		}
		del(int32(base + k%(1<<16)))
	}
}

// BenchmarkMemory reports the heap a Table and a map[int32]uint32 hold for
// n live pids, packed from pid 300 as on a quiet host.
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{500, 32768} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var tb, mb uint64
			for b.Loop() {
				var tab Table
				m := map[int32]uint32{}
				tb = heapOf(func() { fill(n, tab.Set) })
				mb = heapOf(func() { fill(n, func(pid int32, v uint32) { m[pid] = v }) })
				runtime.KeepAlive(m)
				runtime.KeepAlive(&tab)
			}
			b.ReportMetric(float64(tb), "table-B")
			b.ReportMetric(float64(mb), "map-B")
		})
	}
}

func fill(n int, set func(int32, uint32)) {
	for k := range n {
		set(int32(300+k), uint32(k)|1)
	}
}

// heapOf returns the heap that stays allocated after build.
func heapOf(build func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkSparse: a page that holds one pid at a time, set and deleted
// (the exec cache under an exec storm: each child described at its exec,
// forgotten at its exit), so the page empties at every delete.
func BenchmarkSparse(b *testing.B) {
	var t Table
	t.Set(1, 1) // another page, so that the top slice stays
	b.ReportAllocs()
	for k := 0; b.Loop(); k++ {
		pid := int32(5000 + k%1000)
		t.Set(pid, 7)
		t.Delete(pid)
	}
}
