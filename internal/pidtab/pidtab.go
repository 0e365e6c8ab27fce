// Package pidtab is a table from process ids to small non-zero values,
// indexed by the pid itself instead of hashed: the hot-path index of the
// lineage graph and the exec cache.
//
// Mechanism. Linux hands out pids below pid_max
// (/proc/sys/kernel/pid_max), which is at most 4194304 = 2^22 (Max). The
// table splits a pid into a page number (pid / 1024) and a slot in the
// page (pid % 1024): a top slice of page references, grown to the highest
// page used, and pages of 1024 uint32 values (4 KiB) allocated on first
// use. A lookup is two indexings, no hashing, no probing, no tombstones;
// a value of 0 means absent. A page that empties is released (one is kept
// as a spare, so a pid range that fills and empties does not allocate over
// and over), and so is the top slice's empty tail.
//
// Limits. Memory follows how spread out the live pids are, not how many
// there are: 1024 live pids in one page cost 4 KiB, 500 pids that each sit
// in a page of their own cost 500 pages (2 MB). Pids outside [0, Max) (a
// malformed or foreign event, a kernel with a larger pid space) are kept
// in an ordinary map, so the table is correct for every int32, only
// slower there. The zero Table is empty and ready; it is not safe for
// concurrent use.
package pidtab

import (
	"iter"
	"maps"
	"slices"
	"unsafe"
)

// Max is the first pid the table does not index (the kernel's PID_MAX_LIMIT
// on 64-bit): pids at or above it, and negative ones, go to a map.
const Max = 1 << 22

const (
	pageBits = 10
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

type page [pageSize]uint32

// ref is one entry of the top slice: the page and how many of its values
// are set.
type ref struct {
	p *page
	n uint32
}

// Table maps pids to non-zero uint32 values.
type Table struct {
	top   []ref
	spare *page
	over  map[int32]uint32
	n     int
}

// Get returns pid's value, 0 when it has none.
func (t *Table) Get(pid int32) uint32 {
	if u := uint32(pid); u < Max {
		if hi := u >> pageBits; hi < uint32(len(t.top)) {
			if p := t.top[hi].p; p != nil {
				return p[u&pageMask]
			}
		}
		return 0
	}
	return t.over[pid]
}

// Set sets pid's value; Set(pid, 0) is Delete(pid).
func (t *Table) Set(pid int32, v uint32) {
	if v == 0 {
		t.Delete(pid)
		return
	}
	u := uint32(pid)
	if u >= Max {
		if t.over == nil {
			t.over = make(map[int32]uint32)
		}
		if _, ok := t.over[pid]; !ok {
			t.n++
		}
		t.over[pid] = v
		return
	}
	hi := int(u >> pageBits)
	if hi >= len(t.top) {
		t.top = slices.Grow(t.top, hi+1-len(t.top))[:hi+1]
	}
	r := &t.top[hi]
	if r.p == nil {
		r.p = t.newPage()
	}
	slot := &r.p[u&pageMask]
	if *slot == 0 {
		r.n++
		t.n++
	}
	*slot = v
}

// Delete removes pid's value, if any.
func (t *Table) Delete(pid int32) {
	u := uint32(pid)
	if u >= Max {
		if _, ok := t.over[pid]; ok {
			delete(t.over, pid)
			t.n--
		}
		return
	}
	hi := int(u >> pageBits)
	if hi >= len(t.top) || t.top[hi].p == nil {
		return
	}
	r := &t.top[hi]
	slot := &r.p[u&pageMask]
	if *slot == 0 {
		return
	}
	*slot = 0
	t.n--
	if r.n--; r.n == 0 {
		t.release(hi)
	}
}

// Len returns how many pids have a value.
func (t *Table) Len() int { return t.n }

// Clear removes every value and releases the pages (the spare stays).
func (t *Table) Clear() {
	for hi, r := range t.top {
		if r.p != nil && t.spare == nil {
			clear(r.p[:])
			t.spare = r.p
		}
		t.top[hi] = ref{}
	}
	t.top = t.top[:0]
	clear(t.over)
	t.n = 0
}

// All yields every pid and its value: the indexed pids in increasing
// order, then the others in increasing order. The table must not change
// during the iteration.
func (t *Table) All() iter.Seq2[int32, uint32] {
	return func(yield func(int32, uint32) bool) {
		for hi, r := range t.top {
			if r.p == nil {
				continue
			}
			for lo, v := range r.p {
				if v != 0 && !yield(int32(hi<<pageBits|lo), v) {
					return
				}
			}
		}
		for _, pid := range slices.Sorted(maps.Keys(t.over)) {
			if !yield(pid, t.over[pid]) {
				return
			}
		}
	}
}

// Bytes returns the heap the table holds: pages, spare and top slice (the
// map of out-of-range pids not included).
func (t *Table) Bytes() int {
	b := cap(t.top) * int(unsafe.Sizeof(ref{}))
	for _, r := range t.top {
		if r.p != nil {
			b += int(unsafe.Sizeof(page{}))
		}
	}
	if t.spare != nil {
		b += int(unsafe.Sizeof(page{}))
	}
	return b
}

func (t *Table) newPage() *page {
	if p := t.spare; p != nil {
		t.spare = nil
		return p
	}
	return new(page)
}

// release drops the empty page hi (Delete zeroed each of its values: it
// needs no clearing), keeping it as the spare when there is none, and
// trims the top slice's empty tail.
func (t *Table) release(hi int) {
	r := &t.top[hi]
	if t.spare == nil {
		t.spare = r.p
	}
	*r = ref{}
	n := len(t.top)
	for n > 0 && t.top[n-1].p == nil {
		n--
	}
	t.top = t.top[:n]
}
