package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// blockingKill is a backend whose Kill waits until release is closed.
type blockingKill struct {
	fakeBackend
	inFlight atomic.Int32
	release  chan struct{}
}

func (b *blockingKill) Kill(ctx context.Context, p Peer, r *ClaimRequest) (actions.Outcome, error) {
	b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	<-b.release
	return actions.Outcome{Verdict: verdict.Verdict{Result: verdict.Owned}, Dead: true}, nil
}

// serveAs serves h over HTTP as if every connection came from p.
func serveAs(t *testing.T, h http.Handler, p Peer) *Client {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, peerKey{}, p)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c := &Client{socket: ts.URL, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ts.Listener.Addr().String())
		},
	}}}
	t.Cleanup(c.Close)
	return c
}

// TestLongLivedCap: a uid has at most UserLong long-lived requests (kill,
// release) in flight; the next one is answered 429 at once, root's is not
// capped, and a short request of the same uid still passes.
func TestLongLivedCap(t *testing.T) {
	b := &blockingKill{release: make(chan struct{})}
	s := NewServer(b, nil, WithLimits(Limits{UserLong: 2}))
	user := serveAs(t, s.Handler(), Peer{UID: 1000})
	root := serveAs(t, s.Handler(), Peer{UID: 0})
	tok := token.Token{Start: 1, Prec: token.Ticks}
	ctx := context.Background()

	done := make(chan error, 3)
	for _, c := range []*Client{user, user, root} {
		go func() { _, err := c.Kill(ctx, 7, tok, nil); done <- err }()
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return b.inFlight.Load() == 3 }, "three kills in flight")
	var ae *Error
	if _, err := user.Kill(ctx, 7, tok, nil); !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests ||
		!strings.Contains(ae.Message, "uid 1000 has 2 releases and kills") {
		t.Errorf("a third long-lived request of one uid = %v, want 429 naming the cap", err)
	}
	if _, err := user.Status(ctx); err != nil {
		t.Errorf("a short request beside long-lived ones = %v", err)
	}
	close(b.release)
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("a long-lived request within the cap = %v", err)
		}
	}
	if _, err := user.Kill(ctx, 7, tok, nil); err != nil {
		t.Errorf("a long-lived request once the others ended = %v", err)
	}
}

// TestRateBucket: Burst requests at once, then one per 1/Rate; root is
// not capped. The clock is given, not read.
func TestRateBucket(t *testing.T) {
	s := NewServer(fakeBackend{}, nil, WithLimits(Limits{Rate: 2, Burst: 3}))
	p := Peer{UID: 1000}
	at := time.Unix(1000, 0)
	for i := range 3 {
		if _, ok := s.take(p, at); !ok {
			t.Fatalf("take #%d of a burst of 3 refused", i+1)
		}
	}
	wait, ok := s.take(p, at)
	if ok || wait != 500*time.Millisecond {
		t.Errorf("take over the burst = %v, %v, want refused with a wait of 500ms", wait, ok)
	}
	if _, ok := s.take(p, at.Add(500*time.Millisecond)); !ok {
		t.Error("take once a token refilled refused")
	}
	if _, ok := s.take(Peer{UID: 1001}, at); !ok {
		t.Error("another uid's first take refused")
	}
	for range 10 {
		if _, ok := s.take(Peer{UID: 0}, at); !ok {
			t.Fatal("root refused")
		}
	}
}

// treeBackend answers every tree with a walk of n nodes, as a host of n
// processes, of which it shows the caller shown (all when 0: under
// hidepid a user is shown its own only).
type treeBackend struct {
	fakeBackend
	n, shown int
}

func (b treeBackend) Tree(ctx context.Context, p Peer, pid int32, tok token.Token) ([]TreeNode, int, error) {
	nodes := make([]TreeNode, cmp.Or(b.shown, b.n))
	for i := range nodes {
		nodes[i].Pid = int32(i + 1)
	}
	return nodes, b.n, nil
}

// TestChargeByWork: a tree walk of 1,000 nodes costs a uid a hundred
// tokens more than its request's one, however few it is shown, so with a
// burst of 200 its third tree is refused (429) until it has paid; root is
// not charged. (A walk shown as one node cost nothing more.)
func TestChargeByWork(t *testing.T) {
	for _, shown := range []int{0, 1} {
		t.Run(fmt.Sprintf("shown %d", shown), func(t *testing.T) { chargeByWork(t, shown) })
	}
}

func chargeByWork(t *testing.T, shown int) {
	s := NewServer(treeBackend{n: 1000, shown: shown}, nil, WithLimits(Limits{Rate: 0.01, Burst: 200}))
	user := serveAs(t, s.Handler(), Peer{UID: 1000})
	root := serveAs(t, s.Handler(), Peer{UID: 0})
	ctx := context.Background()
	for i := range 2 {
		if _, err := user.Tree(ctx, 1, token.Token{}); err != nil {
			t.Fatalf("uid 1000's tree #%d: %v", i+1, err)
		}
	}
	var ae *Error
	if _, err := user.Tree(ctx, 1, token.Token{}); !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Errorf("uid 1000's third tree of 1,000 nodes = %v, want 429, over its rate", err)
	}
	for range 5 {
		if _, err := root.Tree(ctx, 1, token.Token{}); err != nil {
			t.Fatalf("root's tree: %v", err)
		}
	}
}
