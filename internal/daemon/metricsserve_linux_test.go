package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/metrics"
	"github.com/procsupervisor/supervisor/internal/store"
)

// scrape GETs the metrics over TCP at addr by hand: the body, or "" when
// the connection failed or was closed before a response.
func scrape(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET "+metrics.Path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		return ""
	}
	return string(b)
}

// freePort returns a loopback TCP address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeMetricsPortTaken: a TCP metrics address another process
// listens on first does not fail the start; the endpoint binds once the
// squatter has gone. Before, serveMetrics returned "address already in
// use" and the daemon exited 70, so any local user could keep it from
// starting (systemd restarted it until its start limit). The failure and
// the later bind are written to stderr too, once each: before, only to
// the feed, and a squatted port went unnoticed in the journal.
func TestServeMetricsPortTaken(t *testing.T) {
	h := newHarness(t)
	squat, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	addr := squat.Addr().String()
	h.d.cfg.MetricsListen = addr
	stderrFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	// serveMetrics takes os.Stderr as it is at the call.
	saved := os.Stderr
	os.Stderr = stderrFile
	stop, err := h.d.serveMetrics(h.d.newMetrics())
	os.Stderr = saved
	if err != nil {
		t.Fatalf("serveMetrics with %s taken = %v, want nil (tried again in the background)", addr, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	if err := h.lg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.out.mu.Lock()
	logged := h.out.b.String()
	h.out.mu.Unlock()
	if !strings.Contains(logged, "address already in use") {
		t.Errorf("the failed bind is not logged:\n%s", logged)
	}
	squat.Close()
	// ListenRetry's first attempt comes 5 s after the start.
	var body string
	for end := time.Now().Add(15 * time.Second); body == "" && time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
		body = scrape(addr)
	}
	if !strings.Contains(body, metrics.Claims+"{") {
		t.Fatalf("no scrape served at %s once the squatter closed: %.300q", addr, body)
	}
	stop()
	stopped = true
	b, err := os.ReadFile(stderrFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := []string{"address already in use", "listening now"}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d (%q):\n%s", len(lines), len(want), want, b)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "supervisor: metrics_listen ") || !strings.Contains(lines[i], w) {
			t.Errorf("stderr line %d = %q, want \"supervisor: metrics_listen ...\" saying %q", i, lines[i], w)
		}
	}
}

// TestServeMetricsBadAddress: an address Listen refuses as such still
// fails the start.
func TestServeMetricsBadAddress(t *testing.T) {
	h := newHarness(t)
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.d.cfg.MetricsListen = "unix:" + file
	stop, err := h.d.serveMetrics(h.d.newMetrics())
	if err == nil {
		stop()
		t.Fatalf("serveMetrics(%s) = nil, want an error", h.d.cfg.MetricsListen)
	}
	if !errors.Is(err, metrics.ErrAddress) {
		t.Errorf("serveMetrics(%s) = %v, want ErrAddress", h.d.cfg.MetricsListen, err)
	}
}

// countingStore counts the reads of the store.
type countingStore struct {
	claimStore
	reads atomic.Int64
}

func (s *countingStore) Get(id string) (store.Claim, error) {
	s.reads.Add(1)
	return s.claimStore.Get(id)
}

func (s *countingStore) List(f store.Filter) ([]store.Claim, error) {
	s.reads.Add(1)
	return s.claimStore.List(f)
}

func (s *countingStore) Stats() (store.Stats, error) {
	s.reads.Add(1)
	return s.claimStore.Stats()
}

// indexClaims puts n claims of each kind and state (of uids 1000 and up)
// in the daemon's index, not in the store.
func indexClaims(d *Daemon, n int) {
	for _, k := range store.Kinds() {
		for _, s := range store.States() {
			for i := range n {
				d.claims.set(&store.Claim{ID: fmt.Sprintf("%s-%s-%d", k, s, i), Kind: k, State: s,
					UID: uint32(1000 + i%7), Argv: []string{"sleep", "60"}})
			}
		}
	}
}

// TestMetricsScrapeReadsNoStore: a scrape counts the claims from the
// daemon's index, by kind and state, every user's, without a read of the
// store. Before, each scrape (anyone's, on a TCP address) decoded every
// claim in the store (store.Stats).
func TestMetricsScrapeReadsNoStore(t *testing.T) {
	h := newHarness(t)
	cs := &countingStore{claimStore: h.d.st}
	h.d.st = cs
	const n = 3
	indexClaims(h.d, n)
	addr := freePort(t)
	h.d.cfg.MetricsListen = addr
	stop, err := h.d.serveMetrics(h.d.newMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	body := scrape(addr)
	if body == "" {
		t.Fatalf("no scrape served at %s", addr)
	}
	for _, k := range store.Kinds() {
		for _, s := range store.States() {
			want := fmt.Sprintf("%s{kind=%q,state=%q} %d\n", metrics.Claims, k, s, n)
			if !strings.Contains(body, want) {
				t.Errorf("scrape lacks %q", want)
			}
		}
	}
	if got := cs.reads.Load(); got != 0 {
		t.Errorf("a scrape read the store %d times, want 0", got)
	}
}
