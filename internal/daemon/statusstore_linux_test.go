package daemon

import (
	"context"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
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
