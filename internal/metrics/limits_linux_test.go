package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveTCP serves a new Metrics on a loopback port until the test ends,
// and returns its address.
func serveTCP(t *testing.T) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New("limits-test", Options{}).ServeListener(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// dialAll opens n TCP connections to addr, closed when the test ends,
// with a receive buffer of rcvbuf bytes (the kernel's least) when not 0,
// set before the connection so that its window is small from the start.
func dialAll(t *testing.T, addr string, n, rcvbuf int) []net.Conn {
	t.Helper()
	d := net.Dialer{}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	var cs []net.Conn
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		t.Cleanup(func() { c.Close() })
	}
	// The server accepts them before anything dialled after.
	time.Sleep(100 * time.Millisecond)
	return cs
}

// TestServeEvictsHeaderless: MaxConns connections that send nothing do
// not keep a scrape out: the scrape takes the place of the oldest of them,
// which is closed. Before, the new connection was the one closed, and one
// user holding 16 idle connections (reopened as each timed out) made every
// scrape fail.
func TestServeEvictsHeaderless(t *testing.T) {
	addr := serveTCP(t)
	idle := dialAll(t, addr, MaxConns, 0)
	body := getOrEmpty(addr)
	if !strings.Contains(body, BuildInfo) {
		t.Fatalf("scrape with %d idle connections held = %.200q, want one served", MaxConns, body)
	}
	idle[0].SetReadDeadline(time.Now().Add(time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the oldest idle connection: Read = %v, want it closed", err)
	}
}

// TestServeBodyWithheld: a request whose header announces a body that
// never comes is closed (now at once, refused: TestServeRefusesBody).
// Before ReadTimeout, the server waited for the body with no deadline
// once the header was in, and the connection held its slot for good,
// never to be evicted.
func TestServeBodyWithheld(t *testing.T) {
	addr := serveTCP(t)
	c := dialAll(t, addr, 1, 0)[0]
	if _, err := io.WriteString(c, "GET "+Path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(8 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("reading until the server closes: %v, want EOF within 8 s", err)
	}
}

// The states of a held connection in TestCappedAdmit.
const (
	fresh    = iota // no whole header yet
	headed          // header read, response not out
	answered        // response out
)

// TestCappedAdmit: when full, a new connection replaces the oldest held
// one that is without its header or has its response out; when all are
// between the two, it is closed.
func TestCappedAdmit(t *testing.T) {
	tests := []struct {
		name    string
		held    []int // the held connections' states, oldest first
		admit   bool
		evicted int // index in held, -1 for none
	}{
		{"room", []int{headed}, true, -1},
		{"oldest headerless", []int{headed, fresh, fresh}, true, 1},
		{"all headed", []int{headed, headed, headed}, false, -1},
		{"all headerless", []int{fresh, fresh, fresh}, true, 0},
		{"answered", []int{headed, answered, headed}, true, 1},
		{"answered before headerless", []int{answered, fresh, headed}, true, 0},
		{"headerless before answered", []int{headed, fresh, answered}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &capped{max: 3}
			var held []*slotConn
			for _, st := range tt.held {
				a, b := net.Pipe()
				t.Cleanup(func() { a.Close(); b.Close() })
				c := &slotConn{Conn: a, l: l}
				c.headed.Store(st != fresh)
				c.answered.Store(st == answered)
				if !l.admit(c) {
					t.Fatalf("setup: %d held of 3, admit refused", len(held))
				}
				held = append(held, c)
			}
			a, b := net.Pipe()
			t.Cleanup(func() { a.Close(); b.Close() })
			c := &slotConn{Conn: a, l: l}
			if got := l.admit(c); got != tt.admit {
				t.Errorf("admit with %v held = %v, want %v", tt.held, got, tt.admit)
			}
			for i, h := range held {
				err := h.SetWriteDeadline(time.Now()) // fails on a closed end
				if closed := errors.Is(err, io.ErrClosedPipe); closed != (i == tt.evicted) {
					t.Errorf("held[%d] closed = %v, want %v", i, closed, i == tt.evicted)
				}
			}
			if len(l.held) > l.max {
				t.Errorf("%d held, want at most %d", len(l.held), l.max)
			}
		})
	}
}

// TestSlotConnHeader: the header's end is found across reads, and only
// "\r\n\r\n" ends it.
func TestSlotConnHeader(t *testing.T) {
	tests := []struct {
		reads []string
		want  bool
	}{
		{[]string{"GET / HTTP/1.1\r\nHost: x\r\n\r\n"}, true},
		{[]string{"GET / HTTP/1.1\r\nHost: x\r\n", "\r\n"}, true},
		{[]string{"GET / HTTP/1.1\r", "\n", "\r", "\n"}, true},
		{[]string{"GET / HTTP/1.1\r\n\r\r\n\r\n"}, true},
		{[]string{"GET / HTTP/1.1\r\nHost: x\r\n"}, false},
		{[]string{"GET / HTTP/1.1\r\n\n\r\n"}, false},
		{[]string{"GET / HTTP/1.1\n\n"}, false},
	}
	for _, tt := range tests {
		var c slotConn
		for _, r := range tt.reads {
			c.scan([]byte(r))
		}
		if got := c.headed.Load(); got != tt.want {
			t.Errorf("headed after reads %q = %v, want %v", tt.reads, got, tt.want)
		}
	}
}

// TestListenRetry: an address in use is bound once its holder goes;
// a context done ends the tries; an address that became unusable ends
// them at once.
func TestListenRetry(t *testing.T) {
	oldFirst, oldMax := retryFirst, retryMax
	retryFirst, retryMax = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { retryFirst, retryMax = oldFirst, oldMax })

	squat, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	addr := squat.Addr().String()
	if _, err := Listen(addr); err == nil || errors.Is(err, ErrAddress) {
		t.Fatalf("Listen(%s) in use = %v, want an error other than ErrAddress", addr, err)
	}

	t.Run("freed", func(t *testing.T) {
		failed := make(chan time.Duration, 100)
		type result struct {
			ln  net.Listener
			err error
		}
		got := make(chan result, 1)
		go func() {
			ln, err := ListenRetry(context.Background(), addr, func(_ error, wait time.Duration) {
				select {
				case failed <- wait:
				default:
				}
			})
			got <- result{ln, err}
		}()
		for _, want := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond} {
			if wait := <-failed; wait != want {
				t.Errorf("wait after a failure = %v, want %v", wait, want)
			}
		}
		squat.Close()
		r := <-got
		if r.err != nil {
			t.Fatalf("ListenRetry once the port is free = %v", r.err)
		}
		defer r.ln.Close()
		if r.ln.Addr().String() != addr {
			t.Errorf("ListenRetry bound %s, want %s", r.ln.Addr(), addr)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		held, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if ln, err := ListenRetry(ctx, held.Addr().String(), nil); !errors.Is(err, context.DeadlineExceeded) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("ListenRetry until ctx is done = %v, want %v", err, context.DeadlineExceeded)
		}
	})

	t.Run("address", func(t *testing.T) {
		file := filepath.Join(shortDir(t), "plain")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ListenRetry(context.Background(), "unix:"+file, nil); !errors.Is(err, ErrAddress) {
			t.Errorf("ListenRetry on a regular file = %v, want ErrAddress", err)
		}
	})
}

// TestSocketModeUmask: the unix socket is SocketMode whatever the umask.
// Before, it was 0755 under umask 022 (a scraper other than root could not
// connect) and 0777 under 000.
func TestSocketModeUmask(t *testing.T) {
	dir := shortDir(t)
	for _, umask := range []int{0o022, 0o000, 0o077} {
		sock := filepath.Join(dir, "m.sock")
		old := syscall.Umask(umask)
		ln, err := Listen("unix:" + sock)
		syscall.Umask(old)
		if err != nil {
			t.Fatalf("Listen under umask %03o: %v", umask, err)
		}
		fi, err := os.Lstat(sock)
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != SocketMode {
			t.Errorf("socket mode under umask %03o = %v, want %v", umask, got, os.FileMode(SocketMode))
		}
	}
}
