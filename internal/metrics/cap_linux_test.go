package metrics

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestServeCapsConnections: a local user's idle connections to the
// metrics port hold at most MaxConns of the server's descriptors; one past
// them is closed at once, not left waiting; once they go, a scrape is
// served. Before, 19,990 idle connections took all of the daemon's
// descriptors, and every claim's judge failed to open a pidfd.
func TestServeCapsConnections(t *testing.T) {
	m := New("cap-test", Options{})
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeListener(ctx, ln) }()
	defer func() { cancel(); <-done }()
	addr := ln.Addr().String()

	before := openFDs(t)
	const n = 4 * MaxConns
	var idle []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// The server has accepted them all, and closed each one past the
	// cap: it reads EOF (or a reset) at once.
	// All read at once, for 2 s: within the 5 s a connection has to send
	// its header.
	results := make(chan bool, n)
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range idle {
		go func() {
			c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			results <- err != nil && !isTimeout(err)
		}()
	}
	closed := 0
	for range n {
		if <-results {
			closed++
		}
	}
	if closed != n-MaxConns {
		t.Errorf("%d of %d idle connections were closed at once, want %d (all past the cap of %d)", closed, n, n-MaxConns, MaxConns)
	}
	// This process holds the n client ends; the server at most MaxConns.
	if grew := openFDs(t) - before; grew > n+MaxConns+2 {
		t.Errorf("%d idle connections took %d descriptors, want at most %d: the server's at most %d", n, grew, n+MaxConns+2, MaxConns)
	}
	for _, c := range idle {
		c.Close()
	}
	var body string
	for try := 0; try < 50 && !strings.Contains(body, "supervisor_build_info"); try++ {
		body = getOrEmpty(addr)
		if body == "" {
			time.Sleep(20 * time.Millisecond) // the server sees the closes
		}
	}
	if !strings.Contains(body, "supervisor_build_info") {
		t.Errorf("no scrape served once the idle connections went: %.200q", body)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// getOrEmpty scrapes addr by hand, "" when the connection was closed.
func getOrEmpty(addr string) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET "+Path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	return string(b)
}
