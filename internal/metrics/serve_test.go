package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// get scrapes Path through a real HTTP client dialling ln's address.
func get(t *testing.T, network, addr string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://supervisor" + Path)
	if err != nil {
		t.Fatalf("GET %s over %s %s: %v", Path, network, addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", Path, resp.StatusCode)
	}
	return string(b)
}

// shortDir returns a temporary directory whose socket paths fit in
// sun_path (t.TempDir can be too long on some systems).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestServeListener(t *testing.T) {
	sock := filepath.Join(shortDir(t), "m.sock")
	tests := []struct {
		name, addr string
	}{
		{"tcp", "127.0.0.1:0"},
		{"unix", "unix:" + sock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New("serve-test", Options{})
			ln, err := Listen(tt.addr)
			if err != nil {
				t.Fatalf("Listen(%q): %v", tt.addr, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.ServeListener(ctx, ln) }()

			body := get(t, ln.Addr().Network(), ln.Addr().String())
			if !strings.Contains(body, `supervisor_build_info{goversion=`) || !strings.Contains(body, `version="serve-test"} 1`) {
				t.Errorf("scrape over %s lacks supervisor_build_info:\n%s", tt.name, body)
			}

			cancel()
			if err := <-done; err != nil {
				t.Errorf("ServeListener after cancel = %v, want nil", err)
			}
			if tt.name == "unix" {
				if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("socket %s left behind after shutdown (Lstat: %v)", sock, err)
				}
			}
		})
	}
}

// TestServeCancelled: Serve with a context already done listens, shuts
// down, and returns nil, leaving no socket file.
func TestServeCancelled(t *testing.T) {
	sock := filepath.Join(shortDir(t), "m.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New("dev", Options{}).Serve(ctx, "unix:"+sock); err != nil {
		t.Fatalf("Serve(cancelled) = %v, want nil", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind (Lstat: %v)", err)
	}
}

func TestListenErrors(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr    string
		address bool // wraps ErrAddress
	}{
		{"", true},
		{"9464", true},
		{"unix:", true},
		{"unix:relative.sock", true},
		{"unix:" + file, true},
		{"unix:" + filepath.Join(dir, "missing", "m.sock"), false},
		{"256.0.0.1:99999", false},
	}
	for _, tt := range tests {
		ln, err := Listen(tt.addr)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q) = nil error, want one", tt.addr)
			continue
		}
		if got := errors.Is(err, ErrAddress); got != tt.address {
			t.Errorf("Listen(%q) = %v; errors.Is(ErrAddress) = %v, want %v", tt.addr, err, got, tt.address)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Errorf("a regular file at the socket path was touched: %q, %v", b, err)
	}
	err := New("dev", Options{}).Serve(context.Background(), "unix:"+file)
	if !errors.Is(err, ErrAddress) {
		t.Errorf("Serve on a regular file = %v, want ErrAddress", err)
	}
}

// TestListenStaleSocket: a socket file left by a crashed daemon is
// replaced.
func TestListenStaleSocket(t *testing.T) {
	sock := filepath.Join(shortDir(t), "m.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("setup: stale socket missing: %v", err)
	}
	ln, err := Listen("unix:" + sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- New("dev", Options{}).ServeListener(ctx, ln) }()
	if body := get(t, "unix", sock); !strings.Contains(body, BuildInfo) {
		t.Errorf("scrape lacks %s", BuildInfo)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeListener = %v, want nil", err)
	}
}
