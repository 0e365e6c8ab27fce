package api

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/store"
)

// slowRelease waits out its grace unless the request's context ends.
type slowRelease struct {
	Backend
	grace time.Duration
}

func (b slowRelease) Release(ctx context.Context, p Peer, id string, r *ReleaseRequest) (ReleaseResponse, error) {
	select {
	case <-time.After(b.grace):
		return ReleaseResponse{}, nil
	case <-ctx.Done():
		return ReleaseResponse{}, ctx.Err()
	}
}

// TestLongRequestOutlivesReadTimeout: a release that waits longer than the
// server's read timeout is not cancelled by it. The read timeout bounds
// reading the request; once the body is in, only the client going away
// ends the request. (A report suspected net/http's background read would
// cancel the request's context when the read deadline passed, 15 s in.)
func TestLongRequestOutlivesReadTimeout(t *testing.T) {
	s := NewServer(slowRelease{grace: 1500 * time.Millisecond}, nil)
	s.srv.ReadTimeout = 300 * time.Millisecond
	sock := filepath.Join(t.TempDir(), "s")
	serveOn(t, sock, s)
	c := NewClient(sock)
	defer c.Close()
	if _, err := c.Release(context.Background(), store.NewID(store.Grant), &ReleaseRequest{}); err != nil {
		t.Fatalf("a release that outlasts the read timeout: %v", err)
	}
}
