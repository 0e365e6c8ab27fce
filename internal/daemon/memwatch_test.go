package daemon

import "testing"

// TestMemWatch: memory is given back at the first quiet second after a
// burst, once per burst, not during it, and not after a quiet stretch
// that saw no burst.
func TestMemWatch(t *testing.T) {
	tests := []struct {
		name  string
		ticks []uint64 // the event count at each tick
		want  []bool
	}{
		{"quiet host", []uint64{10, 20, 30, 40}, []bool{false, false, false, false}},
		{"storm then quiet", []uint64{20_000, 40_000, 40_050, 40_060}, []bool{false, false, true, false}},
		{"no quiet second yet", []uint64{20_000, 40_000, 60_000}, []bool{false, false, false}},
		{"two storms", []uint64{35_000, 35_010, 70_000, 70_001}, []bool{false, true, false, true}},
		{"slow steady activity adds up", []uint64{15_000, 15_050, 30_000, 30_010}, []bool{false, false, false, true}},
		{"count restarts", []uint64{40_000, 40_010, 5, 35_000, 35_001}, []bool{false, true, false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m memWatch
			for i, n := range tt.ticks {
				if got := m.tick(n); got != tt.want[i] {
					t.Errorf("tick %d (%d events) = %v, want %v", i, n, got, tt.want[i])
				}
			}
		})
	}
}
