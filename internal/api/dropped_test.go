package api

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientDropped: a connection closed without an answer (what the gate
// does to a uid over its connection cap with no room left to refuse it)
// is ErrDropped, with a message that says why it may have happened and
// that a retry may succeed, not a bare "connection reset by peer". A
// client that gave up itself (its context) is not told the daemon dropped
// it.
func TestClientDropped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(net.Conn)
	}{
		{"closed", func(c net.Conn) { c.Close() }},
		{"reset", func(c net.Conn) {
			// Unread data makes the close a reset.
			time.Sleep(50 * time.Millisecond)
			c.(*net.UnixConn).CloseRead()
			c.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(acceptWith(t, tc.close))
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Status(ctx)
			if !errors.Is(err, ErrDropped) || errors.Is(err, ErrNoDaemon) {
				t.Fatalf("Status() from a socket that closes unanswered = %v, want ErrDropped", err)
			}
			t.Logf("%v", err)
			if msg := err.Error(); !strings.Contains(msg, "cap") || !strings.Contains(msg, "retry later") {
				t.Errorf("ErrDropped's message %q names neither the connection cap nor a retry", msg)
			}
		})
	}

	t.Run("own deadline", func(t *testing.T) {
		// Held, never answered, closed when the test ends.
		c := NewClient(acceptWith(t, func(c net.Conn) { t.Cleanup(func() { c.Close() }) }))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := c.Status(ctx); err == nil || errors.Is(err, ErrDropped) {
			t.Errorf("Status() past its own deadline = %v, want a deadline error, not ErrDropped", err)
		}
	})
}

// acceptWith listens on a socket in a temporary directory and hands each
// connection to conn, on one goroutine, until the test ends.
func acceptWith(t *testing.T, conn func(net.Conn)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conn(c)
		}
	}()
	return sock
}
