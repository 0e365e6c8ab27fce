package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// SocketMode is the mode of a unix socket Listen makes: anyone may
// connect, as far as the socket's directory lets them reach it. Who may
// scrape is the directory's choice (its mode, owner and group), not the
// daemon's umask's: under umask 022 the socket was 0755, and a scraper
// that was not root could not connect (connect needs write permission);
// under umask 000 it was 0777.
const SocketMode = 0o666

// Listen opens addr: "unix:PATH" for a unix socket of mode SocketMode (a
// stale socket file at PATH is replaced; any other file there is an
// error), otherwise a TCP host:port ("127.0.0.1:9464", ":9464"). Errors
// wrap ErrAddress when addr itself is malformed, or names a file that is
// not a socket; any other error (the port in use, a permission refused)
// may pass, and ListenRetry tries again.
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
		// Until the chmod the socket has the umask's mode; nobody the
		// directory keeps out can reach it meanwhile.
		if err := os.Chmod(path, SocketMode); err != nil {
			ln.Close()
			return nil, fmt.Errorf("metrics listen: socket mode: %w", err)
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

// The waits of ListenRetry: retryFirst before its first attempt, doubled
// after each failure up to retryMax (variables for tests).
var (
	retryFirst = 5 * time.Second
	retryMax   = 30 * time.Second
)

// ListenRetry is for an address Listen failed on with an error that does
// not wrap ErrAddress: a TCP port another process (any local user's)
// listens on, a permission refused. It waits, tries Listen again, and
// goes on, the wait doubling from 5 s up to 30 s, until Listen succeeds
// or ctx is done. After each failure, failed (if not nil) is called with
// the error and the wait before the next attempt. It returns the
// listener; an error wrapping ErrAddress at once (the address became
// unusable: a file that is not a socket at its path); or ctx's error.
//
// Limits: a user who holds the port for good keeps the endpoint off for
// as long; the daemon runs meanwhile, which is what the retry is for.
func ListenRetry(ctx context.Context, addr string, failed func(err error, wait time.Duration)) (net.Listener, error) {
	wait := retryFirst
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		ln, err := Listen(addr)
		if err == nil {
			return ln, nil
		}
		if errors.Is(err, ErrAddress) {
			return nil, err
		}
		wait = min(2*wait, retryMax)
		if failed != nil {
			failed(err, wait)
		}
		t.Reset(wait)
	}
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

// MaxConns is how many connections the metrics server holds at once. A
// TCP address, even on loopback, is open to every local user (and ":port"
// to the network): without a cap, one user's idle connections took the
// daemon's descriptors, and its pidfd_open calls failed for every claim.
// A scraper needs one.
//
// When all are held, the one accepted takes the place of the oldest that
// is evictable, which is closed: one that has not yet sent its whole
// request header (a "\r\n\r\n"), or one whose response has been written
// whole. Only when every one held is between the two (its request read,
// its response not yet out) is the new one closed instead. Before, the
// new one was always closed: one user holding 16 connections that sent
// nothing (each timed out after 5 s, and was opened again) made every
// scrape fail; and later, 16 whose header announced a body they never
// sent (net/http read it, to discard it, for up to 5 s after the
// response) did the same. A request with a body, which a scrape never
// has, is now refused at once without reading it (see refuseBody); a
// connection net/http still reads from after its response is evictable
// whatever it waits for. A request without a body is served and closed
// within ReadTimeout (its response, some KiB, fits in the kernel's socket
// buffers whether or not the client reads it).
//
// Limits: a user who opens connections faster than a scraper sends its
// header (microseconds on loopback) can still close the scraper's.
const MaxConns = 16

// ServeListener is Serve on a listener the caller opened (so that a daemon
// can fail at startup on a bad address, then serve in a goroutine). It
// closes ln. At most MaxConns connections are open at once, each for one
// request (no keep-alive), read within 5 s of its connection.
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, m.Handler())
	srv := &http.Server{
		Handler:           slotHandler(mux),
		ReadHeaderTimeout: 5 * time.Second,
		// A request is read whole within the same 5 s. refuseBody reads
		// no body; this bounds whatever else net/http reads after the
		// header (without ReadTimeout, a header announcing a body that
		// never came held its slot with no deadline).
		ReadTimeout:    5 * time.Second,
		WriteTimeout:   30 * time.Second,
		IdleTimeout:    5 * time.Second,
		MaxHeaderBytes: 16 << 10,
		// The handler finds the connection's slot through its context.
		ConnContext: slotContext,
	}
	srv.SetKeepAlivesEnabled(false)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(&capped{Listener: ln, max: MaxConns}) }()
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

// slotKey is the context key under which ConnContext puts a
// connection's *slotConn.
type slotKey struct{}

// slotContext is the server's ConnContext: it puts c (the *slotConn
// capped's Accept returned) in its requests' context.
func slotContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, slotKey{}, c)
}

// slotHandler serves h, except a request with a body (refuseBody), and
// notes on the connection's slotConn when the handler has returned.
func slotHandler(h http.Handler) http.Handler {
	return markHandled(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			refuseBody(w)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// markHandled serves h, then sets handled on the request's slotConn (put
// in its context by slotContext).
func markHandled(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if c, ok := r.Context().Value(slotKey{}).(*slotConn); ok {
			c.handled.Store(true)
		}
	})
}

// bodyRefused is refuseBody's response.
const bodyRefused = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\nContent-Length: 26\r\n\r\nrequest body not accepted\n"

// refuseBody answers 400 to a request that announces a body (a
// Content-Length other than 0, or a Transfer-Encoding), and closes its
// connection without reading the body. Answered through the
// ResponseWriter, net/http would read the body after the response, to
// discard it, for up to 256 KiB or ReadTimeout: a header announcing
// 100,000 bytes that never came held the slot for 5 s. The connection is
// taken over (Hijack) to write the response and close it instead.
//
// Limits: a client that sent part of its body gets a reset as the
// connection closes with it unread, and may lose the 400 with it.
func refuseBody(w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not an HTTP/1 connection (none here): net/http answers, and
		// reads the body within ReadTimeout.
		http.Error(w, "request body not accepted", http.StatusBadRequest)
		return
	}
	c.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(c, bodyRefused)
	c.Close()
}

// capped is a listener that holds at most max connections: when they are
// all held, one accepted replaces the oldest evictable one, or is closed
// (see MaxConns). It goes on accepting either way, so the kernel's
// backlog is drained and no descriptor is held past max.
type capped struct {
	net.Listener
	max  int
	mu   sync.Mutex
	held []*slotConn // in the order accepted
}

func (l *capped) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc := &slotConn{Conn: c, l: l}
		if l.admit(sc) {
			return sc, nil
		}
		c.Close()
	}
}

// admit holds c when a slot is free, or when one can be taken from an
// evictable connection (closed here); it reports whether c is held.
func (l *capped) admit(c *slotConn) bool {
	l.mu.Lock()
	var evict *slotConn
	if len(l.held) >= l.max {
		i := slices.IndexFunc(l.held, (*slotConn).evictable)
		if i < 0 {
			l.mu.Unlock()
			return false
		}
		evict = l.held[i]
		l.held = slices.Delete(l.held, i, i+1)
	}
	l.held = append(l.held, c)
	l.mu.Unlock()
	if evict != nil {
		// Its server goroutine reads an error and closes it again, which
		// finds it no longer held.
		evict.Close()
	}
	return true
}

// release gives c's slot back, if it still holds one.
func (l *capped) release(c *slotConn) {
	l.mu.Lock()
	if i := slices.Index(l.held, c); i >= 0 {
		l.held = slices.Delete(l.held, i, i+1)
	}
	l.mu.Unlock()
}

// headerEnd ends an HTTP request header.
const headerEnd = "\r\n\r\n"

// slotConn is a held connection: it notes when its request header has
// been read in full (headed), and when its response has been (answered),
// and gives its slot back when closed.
//
// Limits: only "\r\n\r\n" counts. net/http also takes a header ended by
// bare "\n\n"; such a client is served, but stays evictable meanwhile.
type slotConn struct {
	net.Conn
	l      *capped
	headed atomic.Bool
	// handled is set by slotHandler once the handler has returned; the
	// response may still be in net/http's buffers then.
	handled atomic.Bool
	// answered is set by the first Read after handled: net/http reads
	// after a handler only once it has flushed the whole response
	// (response.finishRequest flushes, then closes the request body,
	// which reads what is left of it). A Write does not tell as much: a
	// response over 4 KiB goes out in several, and a connection evicted
	// between them loses the rest.
	answered atomic.Bool
	// matched is how many bytes of headerEnd the stream read so far ends
	// with, across reads (net/http reads a connection from one goroutine
	// at a time).
	matched int
	once    sync.Once
}

// evictable reports whether c may be closed to make room: it has not
// sent its whole header, or its response is out.
func (c *slotConn) evictable() bool {
	return !c.headed.Load() || c.answered.Load()
}

func (c *slotConn) Read(b []byte) (int, error) {
	if c.handled.Load() {
		c.answered.Store(true)
	}
	n, err := c.Conn.Read(b)
	if !c.headed.Load() {
		c.scan(b[:n])
	}
	return n, err
}

// scan follows p through headerEnd, and sets headed at its end.
func (c *slotConn) scan(p []byte) {
	for _, ch := range p {
		switch {
		case ch == headerEnd[c.matched]:
			c.matched++
		case ch == '\r': // the start of headerEnd again
			c.matched = 1
		default:
			c.matched = 0
		}
		if c.matched == len(headerEnd) {
			c.headed.Store(true)
			return
		}
	}
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
