package metrics

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrAddress wraps a listen address that cannot be used.
var ErrAddress = errors.New("invalid metrics listen address")

// Path is where Serve exposes the metrics.
const Path = "/metrics"

// shutdownGrace bounds how long Serve waits for scrapes in flight once its
// context is done.
const shutdownGrace = 2 * time.Second

// Handler returns the HTTP handler that writes the exposition in the
// Prometheus text format (compressed when the scraper accepts it). A collector that fails is counted in
// supervisor_metrics_scrape_errors_total and the rest is still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, m.handlerOpts())
}

// Listen opens addr: "unix:PATH" for a unix socket (a stale socket file at
// PATH is replaced; any other file there is an error), otherwise a TCP
// host:port ("127.0.0.1:9464", ":9464"). Errors wrap ErrAddress when addr
// itself is malformed.
func Listen(addr string) (net.Listener, error) {
	if err := CheckAddress(addr); err != nil {
		return nil, err
	}
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if err := removeStaleSocket(path); err != nil {
			return nil, fmt.Errorf("metrics listen %q: %w", addr, err)
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	return ln, nil
}

// CheckAddress reports whether addr has the form Listen takes, without
// listening. Errors wrap ErrAddress.
func CheckAddress(addr string) error {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" || !strings.HasPrefix(path, "/") {
			return fmt.Errorf("metrics listen %q: want unix:/absolute/path: %w", addr, ErrAddress)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("metrics listen %q: want host:port or unix:PATH: %w", addr, ErrAddress)
	}
	return nil
}

// removeStaleSocket removes a socket file left by an earlier run, and
// refuses to remove anything else.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s exists and is not a socket: %w", path, ErrAddress)
	}
	return os.Remove(path)
}

// Serve listens on addr (see Listen) and serves Path until ctx is done, then
// shuts down, waiting briefly for scrapes in flight. It returns nil after a
// shutdown through ctx, and the listen or serve error otherwise.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return m.ServeListener(ctx, ln)
}

// MaxConns is how many connections the metrics server holds at once;
// one past it is closed as soon as it is accepted. A scraper needs one. A
// TCP address, even on loopback, is open to every local user (and ":port"
// to the network): without a cap, one user's idle connections took the
// daemon's descriptors, and its pidfd_open calls failed for every claim.
const MaxConns = 16

// ServeListener is Serve on a listener the caller opened (so that a daemon
// can fail at startup on a bad address, then serve in a goroutine). It
// closes ln. At most MaxConns connections are open at once, each for one
// request (no keep-alive) whose header must come within 5 s.
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, m.Handler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       5 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	srv.SetKeepAlivesEnabled(false)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(&capped{Listener: ln, slots: make(chan struct{}, MaxConns)}) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	// Serve returns http.ErrServerClosed once Shutdown or Close ran; a
	// unix listener removes its socket file as it closes.
	<-served
	return nil
}

// capped is a listener that closes a connection accepted while MaxConns
// are open (slots full), and goes on accepting: the kernel's backlog is
// drained, and no descriptor is held for an excess connection.
type capped struct {
	net.Listener
	slots chan struct{}
}

func (l *capped) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: l.slots}, nil
		default:
			c.Close()
		}
	}
}

// slotConn gives its slot back when it is closed (once).
type slotConn struct {
	net.Conn
	free chan struct{}
	once sync.Once
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.free })
	return err
}
