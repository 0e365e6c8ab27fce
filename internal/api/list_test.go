package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/store"
)

// bulkyBackend lists n claims whose argv is 8 arguments of 4 KiB of '<'
// (32 KiB, the most a launch may give), in id order, after q.After.
type bulkyBackend struct {
	fakeBackend
	claims []Claim
}

func newBulkyBackend(n int) *bulkyBackend {
	b := &bulkyBackend{}
	arg := strings.Repeat("<", 4<<10)
	for i := range n {
		b.claims = append(b.claims, Claim{
			ID: "g-aaaaaaaa" + strings.Map(func(r rune) rune { return 'a' + r - '0' }, fmt.Sprintf("%04d", i)), Kind: store.Grant, UID: 1000, GID: 1000,
			Argv: []string{arg, arg, arg, arg, arg, arg, arg, arg}, State: store.Running,
		})
	}
	return b
}

func (b *bulkyBackend) List(ctx context.Context, p Peer, q ListQuery) ([]Claim, string, error) {
	i, _ := slices.BinarySearchFunc(b.claims, q.After, func(c Claim, id string) int { return strings.Compare(c.ID, id) })
	if i < len(b.claims) && b.claims[i].ID == q.After {
		i++
	}
	out := slices.Clone(b.claims[i:min(i+q.Limit, len(b.claims))])
	next := ""
	if i+q.Limit < len(b.claims) {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// getPage asks for a page of claims after after and returns the answer's
// status, body and next cursor.
func getPage(t *testing.T, c *Client, after string) (int, []byte, string) {
	t.Helper()
	resp, err := c.hc.Get("http://supervisor" + Version + "/claims?after=" + after)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header.Get(NextCursorHeader)
}

// TestListChargedByBytes: a user's pages of bulky claims cost it a token
// per listBytesPerToken bytes sent, so with a burst of 100 it is served
// about 100 × listBytesPerToken bytes before a 429, however few claims
// that is; each page is bounded by maxListBytes; '<' is sent as itself,
// not as the six bytes of \u003c. Before, a page of 100 such claims cost
// 6 tokens and came whole, 20 MB.
func TestListChargedByBytes(t *testing.T) {
	b := newBulkyBackend(200)
	s := NewServer(b, nil, WithLimits(Limits{Rate: 0.001, Burst: 100}))
	user := serveAs(t, s.Handler(), Peer{UID: 1000})
	claimBytes := 8 * (4<<10 + 3) // an argument and its quotes and comma
	sentBytes, claims, after := 0, 0, ""
	for {
		code, body, next := getPage(t, user, after)
		if code == http.StatusTooManyRequests {
			break
		}
		if code != http.StatusOK {
			t.Fatalf("GET /claims after %q = %d %s", after, code, Trunc(string(body), 200))
		}
		if len(body) > maxListBytes+claimBytes+1024 {
			t.Fatalf("a page of %d bytes, want at most %d and a claim", len(body), maxListBytes)
		}
		if bytes.Contains(body, []byte(`\u003c`)) {
			t.Fatal(`a page with '<' written as \u003c`)
		}
		var page []Claim
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("page after %q: %v", after, err)
		}
		if len(page) == 0 || page[0].Argv[0] != b.claims[0].Argv[0] {
			t.Fatalf("page after %q: %d claims, want some, argv as launched", after, len(page))
		}
		if len(body) > len(page)*claimBytes+len(page)*512 {
			t.Errorf("a page of %d claims in %d bytes, want about %d a claim", len(page), len(body), claimBytes)
		}
		sentBytes += len(body)
		claims += len(page)
		if next == "" {
			t.Fatalf("the whole list (%d claims, %d bytes) was sent with a burst of 100 tokens, want a 429 first", claims, sentBytes)
		}
		if next != page[len(page)-1].ID {
			t.Fatalf("next cursor %q, want the last claim sent, %s", next, page[len(page)-1].ID)
		}
		after = next
	}
	if want := 100 * listBytesPerToken; sentBytes > want+maxListBytes || sentBytes < want/2 {
		t.Errorf("%d bytes (%d claims) served for a burst of 100 tokens, want about %d", sentBytes, claims, want)
	}
	// Root is not charged; ListAll follows the cursors to the end.
	root := serveAs(t, s.Handler(), Peer{UID: 0})
	all, err := root.ListAll(context.Background(), ListQuery{})
	if err != nil || len(all) != len(b.claims) {
		t.Fatalf("root's ListAll = %d claims, %v, want %d", len(all), err, len(b.claims))
	}
	for i := range all {
		if all[i].ID != b.claims[i].ID {
			t.Fatalf("root's ListAll #%d = %s, want %s", i, all[i].ID, b.claims[i].ID)
		}
	}
}

// TestIntegrationListUnreadMemory: connections that ask for the list of
// bulky claims and never read the answer hold at most a page each
// (maxListBytes and a claim) of the daemon's memory, on a real server.
// Before, each held its whole answer: 100 claims of 32 KiB of '<' were
// 20 MB of JSON.
func TestIntegrationListUnreadMemory(t *testing.T) {
	b := newBulkyBackend(100)
	sock := serve(t, b, nil)
	const conns = 8
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /v1/claims HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// Each answer's first byte, and no more: the server has encoded a
	// page for every connection, whose writes then stall unread.
	for i, c := range cs {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatalf("connection %d: no answer began: %v", i, err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// A page is built in a bytes.Buffer, which may have grown to twice it.
	if bound := int64(conns * (2*maxListBytes + 128<<10)); grew > bound {
		t.Errorf("%d unread lists hold %d bytes, want at most %d (a page each)", conns, grew, bound)
	}
	t.Logf("%d unread lists hold %d KiB", conns, grew>>10)
}

// BenchmarkListBulky measures what a page of bulky claims costs the
// daemon a byte of JSON, which listBytesPerToken is calibrated by: about
// 0.5 ms of the daemon's CPU a token.
func BenchmarkListBulky(b *testing.B) {
	s := NewServer(newBulkyBackend(maxListBytes/(32<<10)+1), nil)
	h := s.Handler()
	ctx := context.WithValue(context.Background(), peerKey{}, Peer{UID: 0})
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, Version+"/claims", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b.SetBytes(int64(w.Body.Len()))
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
