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

// ServeListener is Serve on a listener the caller opened (so that a daemon
// can fail at startup on a bad address, then serve in a goroutine). It
// closes ln.
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, m.Handler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
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
