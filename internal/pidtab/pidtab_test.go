package pidtab

import (
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// check compares t with the map it must equal, through every read method.
func check(t *testing.T, tab *Table, want map[int32]uint32) {
	t.Helper()
	if tab.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", tab.Len(), len(want))
	}
	for pid, v := range want {
		if got := tab.Get(pid); got != v {
			t.Fatalf("Get(%d) = %d, want %d", pid, got, v)
		}
	}
	got := maps.Collect(tab.All())
	if !maps.Equal(got, want) {
		t.Fatalf("All() = %v, want %v", got, want)
	}
	var pids []int32
	for pid := range tab.All() {
		pids = append(pids, pid)
	}
	indexed := slices.DeleteFunc(slices.Clone(pids), func(p int32) bool { return uint32(p) >= Max })
	if !slices.IsSorted(indexed) {
		t.Fatalf("All() order %v: indexed pids not increasing", pids)
	}
	// Pages held: exactly those with a value in them.
	pages := map[int]bool{}
	for pid := range want {
		if uint32(pid) < Max {
			pages[int(uint32(pid)>>pageBits)] = true
		}
	}
	held := 0
	for hi, r := range tab.top {
		if r.p == nil {
			continue
		}
		held++
		if !pages[hi] {
			t.Fatalf("page %d held with no value in it", hi)
		}
		n := uint32(0)
		for _, v := range r.p {
			if v != 0 {
				n++
			}
		}
		if n != r.n {
			t.Fatalf("page %d counts %d values, holds %d", hi, r.n, n)
		}
	}
	if held != len(pages) {
		t.Fatalf("%d pages held, want %d", held, len(pages))
	}
	if n := len(tab.top); n > 0 && tab.top[n-1].p == nil {
		t.Fatalf("top slice ends with an empty page (len %d)", n)
	}
}

func TestTable(t *testing.T) {
	type op struct {
		pid int32
		v   uint32 // 0 deletes
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"empty", nil},
		{"one", []op{{1, 7}}},
		{"pid 0", []op{{0, 3}}},
		{"overwrite", []op{{5, 1}, {5, 2}}},
		{"delete", []op{{5, 1}, {5, 0}}},
		{"delete absent", []op{{5, 0}, {6, 1}, {7, 0}, {1 << 20, 0}}},
		{"page edges", []op{{pageSize - 1, 1}, {pageSize, 2}, {2*pageSize - 1, 3}, {pageSize, 0}}},
		{"last indexed pid", []op{{Max - 1, 9}}},
		{"first pid past Max", []op{{Max, 9}, {Max - 1, 8}}},
		{"negative and extreme", []op{{-1, 1}, {math.MinInt32, 2}, {math.MaxInt32, 3}, {-1, 0}}},
		{"empty page released then reused", []op{{3000, 1}, {3000, 0}, {9000, 2}, {3001, 4}}},
		{"tail trimmed", []op{{10, 1}, {1 << 21, 2}, {1 << 21, 0}}},
		{"max value", []op{{42, math.MaxUint32}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab Table
			want := map[int32]uint32{}
			for _, o := range tt.ops {
				tab.Set(o.pid, o.v)
				if o.v == 0 {
					delete(want, o.pid)
				} else {
					want[o.pid] = o.v
				}
				check(t, &tab, want)
			}
			for _, o := range tt.ops {
				tab.Delete(o.pid)
				delete(want, o.pid)
				check(t, &tab, want)
			}
			if tab.Bytes() > int(unsafeSizeofPage)+cap(tab.top)*16 {
				t.Errorf("empty table holds %d bytes, want at most a spare page and the top slice", tab.Bytes())
			}
		})
	}
}

const unsafeSizeofPage = pageSize * 4

func TestClear(t *testing.T) {
	var tab Table
	for _, pid := range []int32{1, 2000, 5000, Max + 1, -4} {
		tab.Set(pid, uint32(pid)|1)
	}
	tab.Clear()
	check(t, &tab, map[int32]uint32{})
	if tab.spare == nil {
		t.Error("Clear dropped every page, want one kept as the spare")
	}
	tab.Set(7000, 1)
	check(t, &tab, map[int32]uint32{7000: 1})
}

// TestAllStops checks that All stops when the loop breaks, in both parts.
func TestAllStops(t *testing.T) {
	var tab Table
	for _, pid := range []int32{1, 2, Max, Max + 1} {
		tab.Set(pid, 1)
	}
	for _, stop := range []int{1, 3} {
		n := 0
		for range tab.All() {
			if n++; n == stop {
				break
			}
		}
		if n != stop {
			t.Errorf("All() after break at %d yielded %d", stop, n)
		}
	}
}

// TestRandom drives the table and a map with the same random operations
// over a few pages and out-of-range pids, as a pid allocator that wraps
// would.
func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tab Table
	want := map[int32]uint32{}
	for k := range 20000 {
		var pid int32
		switch r.IntN(8) {
		case 0:
			pid = Max + int32(r.IntN(4)) - 2
		case 1:
			pid = -int32(r.IntN(3))
		default:
			pid = int32(r.IntN(6 * pageSize))
		}
		if r.IntN(3) == 0 {
			tab.Delete(pid)
			delete(want, pid)
		} else {
			v := r.Uint32() | 1
			tab.Set(pid, v)
			want[pid] = v
		}
		if k%997 == 0 {
			check(t, &tab, want)
		}
	}
	check(t, &tab, want)
}

// FuzzTable applies operations decoded from the input (5 bytes each: op,
// pid little-endian; the value is derived from the pid and the op index)
// to a Table and a map, and compares them.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 1, 0, 0, 0})
	f.Add([]byte{0, 0xff, 0xff, 0x3f, 0, 0, 0, 0, 0x40, 0, 2, 0, 0, 0, 0})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var tab Table
		want := map[int32]uint32{}
		for k := 0; len(b) >= 5; b, k = b[5:], k+1 {
			pid := int32(binary.LittleEndian.Uint32(b[1:]))
			switch b[0] % 4 {
			case 0, 1:
				v := uint32(k)<<1 | 1
				tab.Set(pid, v)
				want[pid] = v
			case 2:
				tab.Delete(pid)
				delete(want, pid)
			case 3:
				tab.Clear()
				clear(want)
			}
			if got := tab.Get(pid); got != want[pid] {
				t.Fatalf("op %d: Get(%d) = %d, want %d", k, pid, got, want[pid])
			}
		}
		check(t, &tab, want)
	})
}

// perPage bounds the bytes a page in use costs: itself and its share of
// the top slice, whose capacity append may take past twice its length
// (size classes).
const perPage = unsafeSizeofPage + 4*16

// TestBytes reports the table's memory for 500 and 32768 live pids, packed
// as a fresh host has them and spread one per page, and bounds it.
func TestBytes(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		stride int32
		pages  int // pages the pids fall in
	}{
		{"500 packed", 500, 1, 1},
		{"500 spread", 500, pageSize, 500},
		{"32768 packed", 32768, 1, 33},
		{"32768 spread over pid_max 2^22", 32768, Max / 32768, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab Table
			for k := range tt.n {
				tab.Set(int32(k)*tt.stride+1, 1)
			}
			b := tab.Bytes()
			t.Logf("%d pids, stride %d: %d bytes (%.1f B/pid)", tt.n, tt.stride, b, float64(b)/float64(tt.n))
			if b > tt.pages*perPage {
				t.Errorf("Bytes() = %d, want at most %d", b, tt.pages*perPage)
			}
		})
	}
}
