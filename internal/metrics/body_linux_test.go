package metrics

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// floodBodyAnnounced keeps MaxConns connections to addr, each sending a
// header that announces a body it never sends and opened again the
// moment the server closes it, until the test ends.
func floodBodyAnnounced(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	const req = "GET " + Path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
	for range MaxConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				if _, err := io.WriteString(c, req); err == nil {
					io.Copy(io.Discard, c) // until the server closes it
				}
				stop()
				c.Close()
			}
		}()
	}
	// They hold every slot.
	time.Sleep(300 * time.Millisecond)
}

// TestServeBodyAnnounced: MaxConns connections whose header announces a
// body that never comes, each opened again as soon as it is closed, do
// not keep scrapes out. Before, each was served, then held its slot for
// ReadTimeout (5 s) while net/http read the body to discard it: its
// header was in, so it was never evicted, and every scrape was closed
// unanswered.
func TestServeBodyAnnounced(t *testing.T) {
	addr := serveTCP(t)
	floodBodyAnnounced(t, addr)
	const tries = 10
	served := 0
	for range tries {
		if strings.Contains(getOrEmpty(addr), BuildInfo) {
			served++
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A user who opens connections faster than the scraper sends its
	// header can still close it now and then (see MaxConns).
	t.Logf("%d of %d served", served, tries)
	if served < tries-2 {
		t.Errorf("%d of %d scrapes served while %d connections announced bodies they withheld, want at least %d", served, tries, MaxConns, tries-2)
	}
}

// TestServeRefusesBody: a request that announces a body is answered 400
// and closed at once, its body unread; one without is served.
func TestServeRefusesBody(t *testing.T) {
	addr := serveTCP(t)
	tests := []struct {
		name, req, status string
	}{
		{"content-length", "GET " + Path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", "400"},
		{"chunked", "GET " + Path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "400"},
		{"other path", "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", "400"},
		{"http/1.0", "GET " + Path + " HTTP/1.0\r\nContent-Length: 100\r\n\r\n", "400"},
		{"content-length 0", "GET " + Path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "200"},
		{"none", "GET " + Path + " HTTP/1.1\r\nHost: x\r\n\r\n", "200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialAll(t, addr, 1, 0)[0]
			if _, err := io.WriteString(c, tt.req); err != nil {
				t.Fatal(err)
			}
			// Well within ReadTimeout's 5 s.
			c.SetReadDeadline(time.Now().Add(time.Second))
			b, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("reading until the server closes: %v (read %.100q), want EOF within 1 s", err, b)
			}
			if want := "HTTP/1.1 " + tt.status + " "; !strings.HasPrefix(string(b), want) {
				t.Errorf("response %.100q, want %q", b, want)
			}
		})
	}
}

// TestSlotConnAnswered: with the real net/http server, a connection
// whose handler is still writing is not evictable, and one net/http
// reads from after its response (to discard a body the handler left
// unread) is, with the response already whole at the client.
func TestSlotConnAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &capped{Listener: ln, max: MaxConns}
	half := strings.Repeat("x", 8<<10) // over net/http's 4 KiB buffer
	inHandler, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{
		Handler: markHandled(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, half)
			close(inHandler)
			<-release
			io.WriteString(w, half)
		})),
		ConnContext: slotContext,
		ReadTimeout: 5 * time.Second,
	}
	srv.SetKeepAlivesEnabled(false)
	go srv.Serve(l)
	defer srv.Close()

	c := dialAll(t, ln.Addr().String(), 1, 0)[0]
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-inHandler
	l.mu.Lock()
	sc := l.held[0]
	l.mu.Unlock()
	if sc.evictable() {
		t.Errorf("evictable with the handler writing, want not")
	}
	close(release)
	c.SetReadDeadline(time.Now().Add(time.Second))
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != 2*len(half) {
		t.Fatalf("response body: %d bytes, %v; want %d", len(b), err, 2*len(half))
	}
	// net/http now reads the body it was promised; nothing else is left
	// to send.
	for end := time.Now().Add(time.Second); !sc.evictable(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("not evictable 1 s after its whole response, with net/http reading its body")
		}
	}
}
