package daemon

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationAdmitFromIndex: an admit finds a process already claimed
// from the in-memory index, not by reading every claim from the store
// (which cost any user's admit the whole store); a second admit of the
// same process is still refused.
func TestIntegrationAdmitFromIndex(t *testing.T) {
	h := newHarness(t)
	cmd := testenv.Start(t, "sleep", "600")
	pid := int32(cmd.Process.Pid)
	tok, err := local.ReadToken(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	p := api.Peer{Pid: int32(os.Getpid())}
	var cl api.Claim
	testenv.EventuallyNil(t, 10*time.Second, func() (err error) {
		cl, err = h.d.Admit(context.Background(), p, &api.AdmitRequest{Pid: pid, Token: tok})
		return err
	}, "admit %d", pid)
	if _, err := h.d.Admit(context.Background(), p, &api.AdmitRequest{Pid: pid, Token: tok}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("second admit of %d (claimed by %s) = %v, want a conflict", pid, cl.ID, err)
	}
	if n := h.st.lists.Load(); n != 0 {
		t.Errorf("two admits read every claim from the store %d times, want none", n)
	}
}
