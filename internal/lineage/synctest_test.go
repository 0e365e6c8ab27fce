package lineage

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
)

// TestRetentionAgeDefaultClock checks age-based retention with the default
// clock (time.Now), in a synctest bubble whose time is fake.
func TestRetentionAgeDefaultClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{MaxExitedAge: time.Minute})
		apply(g, fork(10, tk(1, 1), 0, token.Token{}, 0), exit(10, tk(1, 1), 0, 0))
		time.Sleep(59 * time.Second)
		g.Expire()
		if _, _, ok := g.Find(10, tk(1, 1)); !ok {
			t.Fatalf("exited node dropped after 59s with MaxExitedAge 1m")
		}
		time.Sleep(time.Second)
		g.Expire()
		if _, _, ok := g.Find(10, tk(1, 1)); ok {
			t.Errorf("exited node still held after 60s with MaxExitedAge 1m")
		}
		if s := g.Stats(); s.Evicted != 1 || s.Exited != 0 {
			t.Errorf("Stats() = %+v, want 1 evicted, 0 exited", s)
		}
	})
}
