package daemon

import "testing"

// TestMemberFDs: one uid takes its share and no more, all uids but root
// together take the total and no more, root has no budget, and what is
// given back can be taken again.
func TestMemberFDs(t *testing.T) {
	m := &fdBudget{perUID: 3, total: 5, used: map[uint32]int{}}
	if m.forUID(0) != nil {
		t.Fatal("root's teardowns have a budget")
	}
	take := func(uid uint32, n int) int {
		got := 0
		for range n {
			if m.forUID(uid).Take() {
				got++
			}
		}
		return got
	}
	for _, tt := range []struct {
		uid       uint32
		ask, want int
	}{
		{1000, 4, 3}, // its share
		{1001, 4, 2}, // what the total leaves
		{1002, 1, 0},
	} {
		if got := take(tt.uid, tt.ask); got != tt.want {
			t.Errorf("uid %d took %d of %d asked, want %d", tt.uid, got, tt.ask, tt.want)
		}
	}
	m.forUID(1000).Give(3)
	if got := take(1002, 4); got != 3 {
		t.Errorf("after uid 1000 gave 3 back, uid 1002 took %d, want 3", got)
	}
	if _, ok := m.used[1000]; ok || m.all != 5 {
		t.Errorf("used %v, all %d: want uid 1000 gone and 5 in all", m.used, m.all)
	}
}
