package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
)

// TestIntegrationStoreKeptForRoot: past three quarters of the store's
// file, a user's launch is refused (503, saying the store is full) while
// root's is still taken. Before, users within their quotas filled the
// store and every launch failed, root's too, as a caller's bad request.
func TestIntegrationStoreKeptForRoot(t *testing.T) {
	h := newHarnessWith(t, store.Options{MaxFileSize: 1 << 20})
	filler := strings.Repeat("f", 3000)
	for {
		used, limit, err := h.st.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if used*5 >= limit*4 {
			break
		}
		if err := h.st.Put(&store.Claim{Kind: store.Grant, State: store.Released, Argv: []string{"/bin/true", filler}}); err != nil {
			t.Fatalf("filling the store to 80%%: at %d of %d bytes: %v", used, limit, err)
		}
	}
	// The caller: a process of nobody's, whose limits and root the
	// launch reads.
	caller := exec.Command("sleep", "600")
	caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caller.Process.Kill(); caller.Wait() })
	nobody := api.Peer{UID: 65534, GID: 65534, Pid: int32(caller.Process.Pid)}
	_, err := h.d.Launch(context.Background(), nobody, &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "full") {
		t.Errorf("nobody's launch into a store 80%% full = %v, want 503, the store full", err)
	}
	root := api.Peer{Pid: int32(os.Getpid())}
	if _, err := h.d.Launch(context.Background(), root, &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"}); err != nil {
		t.Errorf("root's launch into a store 80%% full = %v, want it taken", err)
	}
}

// TestClaimBytesAsStored: a claim costs its owner's byte quota at least
// its record as stored, where a control character takes six bytes.
func TestClaimBytesAsStored(t *testing.T) {
	tests := []struct {
		name string
		argv []string
	}{
		{"plain", []string{"/bin/true", strings.Repeat("x", 3000)}},
		{"control characters", []string{"/bin/true", strings.Repeat("\x01", 3000)}},
		{"short", []string{"true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := store.Claim{ID: "g-abcdefghijkl", Kind: store.Grant, Argv: tt.argv, Cwd: "/"}
			n, err := store.RecordSize(&c)
			if err != nil {
				t.Fatal(err)
			}
			if got := claimBytes(&c); got < int64(n) {
				t.Errorf("claimBytes = %d, want at least the record's %d bytes", got, n)
			}
		})
	}
}
