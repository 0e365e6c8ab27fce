package daemon

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
)

// TestClaimIndexSubsets: the answers read from the index's subsets (by
// uid, by share, by root pid) are the answers of a look at every claim,
// through claims set, changed, closed and deleted at random.
func TestClaimIndexSubsets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := newClaimIndex()
	uids := []uint32{0, 1000, 1001, 1002}
	states := []store.State{store.Running, store.Releasing, store.Released, store.Exited, store.Survivors}
	claims := map[string]store.Claim{}
	for step := range 3000 {
		id := fmt.Sprintf("g-%03d", r.IntN(200))
		c, had := claims[id]
		switch {
		case had && r.IntN(5) == 0:
			x.del(id)
			delete(claims, id)
			continue
		case had:
			c.State = states[r.IntN(len(states))] // a state change keeps uid, share and root
		default:
			c = store.Claim{ID: id, Kind: store.Grant, UID: uids[r.IntN(len(uids))], State: store.Running,
				Pid: int32(100 + r.IntN(20)), Token: tok(uint64(r.IntN(3)))}
			if r.IntN(4) == 0 {
				c.ShareUID = uids[r.IntN(len(uids))]
			}
		}
		claims[id] = c
		x.set(&c)
		if step%50 != 0 {
			continue
		}
		for _, uid := range uids {
			open, bytes := 0, int64(0)
			var counts = map[store.Kind]map[store.State]int{}
			var mine []string
			for _, c := range claims {
				if claimShare(&c) == uid {
					bytes += claimBytes(&c)
					if Open(c.State) {
						open++
					}
					if counts[c.Kind] == nil {
						counts[c.Kind] = map[store.State]int{}
					}
					counts[c.Kind][c.State]++
				}
				if c.UID == uid && Open(c.State) {
					mine = append(mine, c.ID)
				}
			}
			gotOpen, gotBytes, _ := x.usage(uid)
			gotCounts, n, _, _ := x.countsOf(uid)
			if gotOpen != open || gotBytes != bytes || !maps.EqualFunc(gotCounts, counts, maps.Equal) || n != total(counts) {
				t.Fatalf("step %d, share %d: usage %d open, %d bytes, counts %v; want %d, %d, %v", step, uid, gotOpen, gotBytes, gotCounts, open, bytes, counts)
			}
			for pid := int32(100); pid < 120; pid++ {
				var roots []string
				for _, c := range claims {
					if c.Pid == pid && Open(c.State) && sameInstance(c.Token, tok(1)) {
						roots = append(roots, c.ID)
					}
				}
				gotRoots, gotMine := x.find(pid, tok(1), uid, false)
				if !sameIDs(gotRoots, roots) || !sameIDs(gotMine, mine) {
					t.Fatalf("step %d: find(%d, uid %d) = %v, %v; want %v, %v", step, pid, uid, gotRoots, gotMine, roots, mine)
				}
				if got := x.openRoots(pid); len(got) != countOpenAt(claims, pid) {
					t.Fatalf("step %d: openRoots(%d) = %v, want %d", step, pid, got, countOpenAt(claims, pid))
				}
			}
			var all []string
			for _, c := range claims {
				if c.UID == uid {
					all = append(all, c.ID)
				}
			}
			ids, _ := x.page(api.ListQuery{}, &uid)
			if !sameIDs(ids, all) {
				t.Fatalf("step %d: page of uid %d = %v, want %v", step, uid, ids, all)
			}
		}
	}
}

func total(counts map[store.Kind]map[store.State]int) int {
	n := 0
	for _, byState := range counts {
		for _, c := range byState {
			n += c
		}
	}
	return n
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func countOpenAt(claims map[string]store.Claim, pid int32) int {
	n := 0
	for _, c := range claims {
		if c.Pid == pid && Open(c.State) {
			n++
		}
	}
	return n
}

// BenchmarkIndexUserQuestions: a user's quota check (usage), status
// (countsOf) and list page with 30,000 claims of other users indexed and
// 10 of its own.
func BenchmarkIndexUserQuestions(b *testing.B) {
	x := newClaimIndex()
	for i := range 30000 {
		x.set(&store.Claim{ID: fmt.Sprintf("g-%05d", i), Kind: store.Grant, UID: uint32(2000 + i%100), State: store.Running, Pid: int32(1000 + i)})
	}
	for i := range 10 {
		x.set(&store.Claim{ID: fmt.Sprintf("u-%02d", i), Kind: store.Grant, UID: 1000, State: store.Running, Pid: int32(500 + i)})
	}
	uid := uint32(1000)
	b.ReportAllocs()
	for b.Loop() {
		x.usage(uid)
		x.countsOf(uid)
		x.page(api.ListQuery{Limit: 100}, &uid)
	}
}
