package daemon

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestReleaseRecordFits: a release that reports a user's thousand-process
// tree (a root gone without a cgroup to prove its descendants, members
// of another uid) must still fit the claim's record, beside the largest
// argv the store takes, or the claim never closes and every pass of the
// reaper counts a store error. The lists keep what fits and say how many
// were left out.
func TestReleaseRecordFits(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "claims.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	argv := make([]string, 32)
	for i := range argv {
		argv[i] = strings.Repeat("a", store.DefaultLimits.MaxArgvBytes/len(argv))
	}
	c := store.Claim{Kind: store.Grant, UID: 1000, Argv: argv, Cwd: "/" + strings.Repeat("d", 4000), Pid: 100,
		Token: token.Token{Boot: procfs.BootID{1}, Start: 1, Ino: 1, Prec: token.Ticks}}
	if err := s.Put(&c); err != nil {
		t.Fatal(err)
	}
	const n = 1500
	ms := make([]actions.Member, n)
	for i := range ms {
		ms[i] = actions.Member{Pid: int32(1000 + i), Token: token.Token{Boot: procfs.BootID{1}, Start: uint64(i), Ino: uint64(1 << 40), Prec: token.Ticks},
			Reason: fmt.Sprintf("belongs to uid 0 (real), 0 (saved): uid 1000 may not signal it %s", strings.Repeat("x", 400))}
	}
	rel := &store.Release{Cause: "requested"}
	rel.Survivors, rel.SurvivorsTotal = instances(ms)
	rel.Unproven, rel.UnprovenTotal = instances(ms)
	if err := s.Update(c.ID, func(x *store.Claim) error { x.State, x.Release = store.Released, rel; return nil }); err != nil {
		t.Fatalf("release record of %d survivors and %d unproven: %v", len(rel.Survivors), len(rel.Unproven), err)
	}
	last := rel.Unproven[len(rel.Unproven)-1]
	if want := fmt.Sprintf("and %d more processes not recorded", n-len(rel.Unproven)); len(rel.Unproven) >= n || !strings.Contains(last.Reason, want) {
		t.Errorf("kept %d of %d, last reason %q: want it to say %q", len(rel.Unproven), n, last.Reason, want)
	}
	if rel.UnprovenTotal != n || rel.SurvivorsTotal != n {
		t.Errorf("totals %d survivors, %d unproven; want %d each", rel.SurvivorsTotal, rel.UnprovenTotal, n)
	}
	if got, total := instances(ms[:3]); len(got) != 3 || total != 0 || strings.Contains(got[2].Reason, "more") {
		t.Errorf("instances of 3 = %+v, total %d; want all 3 as they are, no total", got, total)
	}
}
