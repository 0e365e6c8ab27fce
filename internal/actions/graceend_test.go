package actions

import (
	"testing"
	"time"
)

// TestGraceEndOnlyEarlier: a grace's end is set once, then only moved
// earlier; a nil GraceEnd has none.
func TestGraceEndOnlyEarlier(t *testing.T) {
	var nilEnd *GraceEnd
	if _, ok := nilEnd.end(); ok {
		t.Error("a nil GraceEnd has an end")
	}
	var g GraceEnd
	t0 := time.Now()
	for _, tt := range []struct {
		at    time.Time
		moved bool
		want  time.Time
	}{
		{t0.Add(time.Hour), true, t0.Add(time.Hour)},
		{t0.Add(2 * time.Hour), false, t0.Add(time.Hour)},
		{t0.Add(time.Hour), false, t0.Add(time.Hour)},
		{t0.Add(time.Second), true, t0.Add(time.Second)},
	} {
		if moved := g.Shorten(tt.at); moved != tt.moved {
			t.Errorf("Shorten(+%v) = %v, want %v", tt.at.Sub(t0), moved, tt.moved)
		}
		if got, ok := g.end(); !ok || !got.Equal(tt.want) {
			t.Errorf("after Shorten(+%v): end +%v (%v), want +%v", tt.at.Sub(t0), got.Sub(t0), ok, tt.want.Sub(t0))
		}
	}
}
