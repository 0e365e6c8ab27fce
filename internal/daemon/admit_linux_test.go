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
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestIntegrationAdmitFromIndex: an admit finds a process already claimed
// from the in-memory index, not by reading every claim from the store
// (which cost any user's admit the whole store); a second admit of the
// same process is still refused.
func TestIntegrationAdmitFromIndex(t *testing.T) {
	h := newHarness(t)
	cmd := testenv.Start(t, "sleep", "600")
	pid := int32(cmd.Process.Pid)
	cl, tok := h.admit(t, pid)
	p := api.Peer{Pid: int32(os.Getpid())}
	if _, err := h.d.Admit(context.Background(), p, &api.AdmitRequest{Pid: pid, Token: tok}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("second admit of %d (claimed by %s) = %v, want a conflict", pid, cl.ID, err)
	}
	if n := h.st.lists.Load(); n != 0 {
		t.Errorf("two admits read every claim from the store %d times, want none", n)
	}
}

// admit admits pid as this process (root), once its token can be read and
// the daemon takes it, and returns the claim and the token it named.
func (h *harness) admit(t *testing.T, pid int32) (api.Claim, token.Token) {
	t.Helper()
	tok, err := local.ReadToken(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	var cl api.Claim
	testenv.EventuallyNil(t, 10*time.Second, func() (err error) {
		cl, err = h.d.Admit(context.Background(), api.Peer{Pid: int32(os.Getpid())}, &api.AdmitRequest{Pid: pid, Token: tok})
		return err
	}, "admit %d", pid)
	return cl, tok
}
