package daemon

import (
	"context"
	"slices"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationStoreErrorTextRootOnly: the last store error names other
// users' claims; status gives its text to root only, its count to all.
func TestIntegrationStoreErrorTextRootOnly(t *testing.T) {
	h := newHarness(t)
	h.d.storeFailed("update claim g-aaaaaaaaaaaa", errDiskFull)
	for _, tc := range []struct {
		uid      uint32
		wantText bool
	}{{0, true}, {1000, false}} {
		st, err := h.d.Status(context.Background(), api.Peer{UID: tc.uid, GID: tc.uid, Pid: 1})
		if err != nil {
			t.Fatal(err)
		}
		if st.StoreErrors != 1 || (st.LastStoreError != "") != tc.wantText {
			t.Errorf("Status for uid %d: store errors %d, last %q; want 1, text %v", tc.uid, st.StoreErrors, st.LastStoreError, tc.wantText)
		}
	}
}

// TestIntegrationStatusOwnClaims: status tells a user of the claims that
// count against its quotas only: the start-up reconcile's items and
// counts, and none of the daemon-wide counts of all users' claims
// (members recorded, holders watched); root is told of all.
func TestIntegrationStatusOwnClaims(t *testing.T) {
	h := newHarness(t)
	var ids [2]string
	for i, uid := range []uint32{0, 1000} {
		cmd, _ := testenv.Shell(t, "exec sleep 60", 0)
		ids[i] = h.grant(t, cmd.Process.Pid, uid).ID
	}
	h.d.membersRecorded.Add(5)
	rep := h.d.reconcileStart(context.Background())
	if rep.Seen != 2 || rep.Readopted != 2 || rep.Mechanism != string(h.d.tr.Load().Mechanism()) {
		t.Fatalf("start-up reconcile %+v, want 2 seen and readopted, by the tracker's mechanism", rep)
	}
	for _, tc := range []struct {
		uid     uint32
		want    []string
		members uint64
	}{{0, ids[:], 5}, {1000, ids[1:], 0}, {1001, nil, 0}} {
		st, err := h.d.Status(context.Background(), api.Peer{UID: tc.uid, GID: tc.uid, Pid: 1})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range st.Reconcile.Items {
			got = append(got, it.ID)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) || st.Reconcile.Seen != len(want) || st.Reconcile.Readopted != len(want) || st.MembersQueued != tc.members ||
			len(want) > 0 && st.Reconcile.Mechanism != rep.Mechanism {
			t.Errorf("Status for uid %d: reconcile %+v, members recorded %d; want items %v, as many seen and readopted, %d recorded",
				tc.uid, st.Reconcile, st.MembersQueued, want, tc.members)
		}
	}
}

// TestIntegrationPassSurvivesUnreadableStore: a pass whose store cannot
// list the claims reports a failure, counts a store error and changes and
// signals nothing; the next pass, the store readable again, goes on.
func TestIntegrationPassSurvivesUnreadableStore(t *testing.T) {
	h := newHarness(t)
	cmd, _ := testenv.Shell(t, "exec sleep 60", 0)
	c := h.grant(t, cmd.Process.Pid, 0)
	h.st.failList.Store(true)
	rep := h.d.reconcileAll(context.Background(), request{trigger: Pass})
	h.st.failList.Store(false)
	if rep.Failed != 1 || rep.Seen != 0 || len(rep.Items) != 1 || rep.Items[0].Action != "failed" || h.d.storeErrors.Load() != 1 {
		t.Errorf("pass over an unreadable store = %+v, store errors %d; want one failure said, none seen, one store error", rep, h.d.storeErrors.Load())
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the claim's root was signalled: %v", err)
	}
	rep = h.d.reconcileAll(context.Background(), request{trigger: Pass})
	if rep.Failed != 0 || rep.Seen != 1 {
		t.Errorf("the next pass = %+v, want the claim seen", rep)
	}
	if got, err := h.st.Get(c.ID); err != nil || got.State != store.Running {
		t.Errorf("claim after the passes: %s, %v; want running", got.State, err)
	}
}
