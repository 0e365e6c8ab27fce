package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// ErrNoDaemon wraps a failure to reach the daemon's socket.
var ErrNoDaemon = errors.New("supervisor daemon not reachable")

// ErrSocketDenied wraps a socket this user may not connect to: a daemon
// is there, and refused; it is not ErrNoDaemon. The message names the
// socket's owner, group and mode and the fix.
var ErrSocketDenied = errors.New("not allowed to use the daemon's socket")

// ErrNotDaemon wraps an answer from a socket that is not this daemon's
// (supervisord's, any HTTP server): its answers lack APIHeader. An error
// that wraps it wraps ErrNoDaemon too: no supervisor daemon answered.
var ErrNotDaemon = errors.New("the socket answers, but not as the supervisor daemon")

// ErrDropped wraps a connection the daemon closed without an answer: its
// gate drops a connection of a uid that holds its connection cap and as
// many waiting (Limits), when it has no room left even to refuse it, and
// a daemon that stops drops what it was reading. A retry later may
// succeed; a request the daemon was stopping under may or may not have
// been carried out.
var ErrDropped = errors.New("the daemon closed the connection without an answer")

// Client calls the API over a Unix socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a Client for the daemon listening on socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, socket)
		},
		MaxIdleConns: 4,
		// Under the server's idle timeout (DefaultLimits), so that the
		// client drops a connection before the server closes it under a
		// request it is sending.
		IdleConnTimeout: 5 * time.Second,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// PrivateSocket is the path of the daemon's private socket beside its API
// socket sock, or "" when that path is too long for a unix socket. The
// daemon makes it mode 0600, its own user's, so root (and that user) may
// connect and no one else: other users that keep the shared socket's
// listen backlog full (a connect loop) cannot keep root out, whose
// clients connect there first. systemd keeps /run/systemd/private for
// the same reason.
func PrivateSocket(sock string) string {
	p := sock + ".root"
	if len(p) > maxSocketPath {
		return ""
	}
	return p
}

// maxSocketPath is the longest path a unix socket address holds
// (sun_path is 108 bytes with its NUL).
const maxSocketPath = 107

// DialRetry is how long a connect is retried while the daemon's listen
// backlog is full: a Unix socket's connect then fails with EAGAIN at once
// (Go's sockets do not block), where the daemon would have answered a
// moment later. Other users that connect in a loop can keep the backlog
// full, and the daemon cannot accept faster than they connect.
const DialRetry = 5 * time.Second

// dial connects to socket, retrying a connect that fails with EAGAIN for
// DialRetry (or until ctx ends), after a pause that starts at 100 µs and
// doubles up to 5 ms: the backlog has room only for moments, between the
// daemon's accepts and the next connects of whoever fills it.
func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	if p := PrivateSocket(socket); p != "" && os.Geteuid() == 0 {
		if c, err := d.DialContext(ctx, "unix", p); err == nil {
			return c, nil
		}
		// None there (an older daemon, or none), or not this one's
		// to serve: the shared socket says which.
	}
	end := time.Now().Add(DialRetry)
	pause := 100 * time.Microsecond
	for {
		c, err := d.DialContext(ctx, "unix", socket)
		if err == nil || !errors.Is(err, syscall.EAGAIN) || time.Now().Add(pause).After(end) {
			return c, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// Socket returns the socket path.
func (c *Client) Socket() string { return c.socket }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends a request; out receives the JSON answer. Errors: *Error for an
// answer with an error status, ErrNoDaemon when the socket cannot be reached.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
		}
	}
	return nil
}

// send sends a request and returns a successful answer, whose body the
// caller closes. Errors as do's.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	return c.sendAccept(ctx, method, path, in, "")
}

// sendAccept is send with an Accept header, unless accept is "".
func (c *Client) sendAccept(ctx context.Context, method, path string, in any, accept string) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://supervisor"+Version+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			if errors.Is(op.Err, syscall.EACCES) || errors.Is(op.Err, syscall.EPERM) {
				return nil, fmt.Errorf("%s: %w%s", c.socket, ErrSocketDenied, socketAdvice(c.socket))
			}
			return nil, fmt.Errorf("%s: %w: %v", c.socket, ErrNoDaemon, op.Err)
		}
		if ctx.Err() == nil && dropped(err) {
			return nil, fmt.Errorf("%s %s: %w (%v): either it is stopping, or this user has more connections "+
				"open to it than its cap allows (by default %d served and %d waiting for each user); retry later",
				method, path, ErrDropped, err, DefaultLimits.UserConns, DefaultLimits.UserConns)
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.Header.Get(APIHeader) == "" {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %w: %w (it answered %s %s with %q, without the %s header)",
			c.socket, ErrNoDaemon, ErrNotDaemon, method, path, Trunc(resp.Status, 80), APIHeader)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var eb ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = http.StatusText(resp.StatusCode)
		}
		if eb.Code == "" {
			eb.Code = codeOfStatus(resp.StatusCode)
		}
		e := &Error{Status: resp.StatusCode, Code: eb.Code, Message: Trunc(eb.Error, MaxString)}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			e.RetryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		return nil, e
	}
	return resp, nil
}

// doWatch is do for an answer that may stream progress: with progress
// not nil it asks for a stream and tells progress each step.
func (c *Client) doWatch(ctx context.Context, method, path string, in, out any, progress func(string)) error {
	if progress == nil {
		return c.do(ctx, method, path, in, out)
	}
	resp, err := c.sendAccept(ctx, method, path, in, NDJSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != NDJSON {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
			return fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
		}
		return nil
	}
	return readStream(resp.Body, method+" "+path, out, progress)
}

// Launch starts a process under the daemon.
func (c *Client) Launch(ctx context.Context, r *LaunchRequest) (Claim, error) {
	var out Claim
	err := c.do(ctx, http.MethodPost, "/launch", r, &out)
	return out, err
}

// Admit registers an existing process.
func (c *Client) Admit(ctx context.Context, r *AdmitRequest) (Claim, error) {
	var out Claim
	err := c.do(ctx, http.MethodPost, "/admit", r, &out)
	return out, err
}

// Release tears a claim down.
func (c *Client) Release(ctx context.Context, id string, r *ReleaseRequest) (ReleaseResponse, error) {
	return c.ReleaseWatch(ctx, id, r, nil)
}

// ReleaseWatch is Release that tells progress, unless nil, each step of
// the teardown as the daemon starts it.
func (c *Client) ReleaseWatch(ctx context.Context, id string, r *ReleaseRequest, progress func(string)) (ReleaseResponse, error) {
	var out ReleaseResponse
	err := c.doWatch(ctx, http.MethodPost, "/claims/"+url.PathEscape(id)+"/release", r, &out, progress)
	return out, err
}

// List returns the claims the caller may see.
func (c *Client) List(ctx context.Context) ([]Claim, error) {
	return c.ListAll(ctx, ListQuery{})
}

// ListAll returns every claim q selects (q.After and q.Limit aside), page
// after page.
func (c *Client) ListAll(ctx context.Context, q ListQuery) ([]Claim, error) {
	all := []Claim{}
	q.After = ""
	for {
		page, next, err := c.ListPage(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		q.After = next
	}
}

// ListPage returns one page of claims and the cursor of the next ("" on
// the last page).
func (c *Client) ListPage(ctx context.Context, q ListQuery) ([]Claim, string, error) {
	v := url.Values{}
	for k, s := range map[string]string{"after": q.After, "owner": q.Owner, "state": q.State} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.UID != nil {
		v.Set("uid", strconv.FormatUint(uint64(*q.UID), 10))
	}
	resp, err := c.send(ctx, http.MethodGet, "/claims?"+v.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out []Claim
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, "", fmt.Errorf("GET /claims: %w", err)
	}
	return out, resp.Header.Get(NextCursorHeader), nil
}

// Get returns one claim.
func (c *Client) Get(ctx context.Context, id string) (Claim, error) {
	var out Claim
	err := c.do(ctx, http.MethodGet, "/claims/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Reap runs the reaper once (or reports what it would do).
func (c *Client) Reap(ctx context.Context, dryRun bool) (Report, error) {
	var out Report
	err := c.do(ctx, http.MethodPost, "/reap", &ReapRequest{DryRun: dryRun}, &out)
	return out, err
}

// Status describes the daemon.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	err := c.do(ctx, http.MethodGet, "/status", nil, &out)
	return out, err
}

// Verify judges (pid, token) with the daemon's lineage graph behind it.
func (c *Client) Verify(ctx context.Context, pid int32, tok token.Token) (verdict.Verdict, error) {
	var out verdict.Verdict
	err := c.do(ctx, http.MethodPost, "/verify", &ClaimRequest{Pid: pid, Token: tok}, &out)
	return out, err
}

// Kill tears down (pid, token) and its observed tree; the daemon refuses
// unless the instance is a root or a recorded member of a claim the caller
// may act on, and OWNED.
func (c *Client) Kill(ctx context.Context, pid int32, tok token.Token, grace *time.Duration) (actions.Outcome, error) {
	return c.KillWatch(ctx, pid, tok, grace, nil)
}

// KillWatch is Kill that tells progress, unless nil, each step of the
// teardown as the daemon starts it.
func (c *Client) KillWatch(ctx context.Context, pid int32, tok token.Token, grace *time.Duration, progress func(string)) (actions.Outcome, error) {
	r := &ClaimRequest{Pid: pid, Token: tok}
	if grace != nil {
		g := Duration(*grace)
		r.Grace = &g
	}
	var out actions.Outcome
	err := c.doWatch(ctx, http.MethodPost, "/kill", r, &out, progress)
	return out, err
}

// Tree lists the observed descendants of pid (of the instance tok names,
// when given), the process itself first.
func (c *Client) Tree(ctx context.Context, pid int32, tok token.Token) ([]TreeNode, error) {
	q := url.Values{"pid": {strconv.Itoa(int(pid))}}
	if !tok.IsZero() {
		q.Set("token", tok.String())
	}
	var out []TreeNode
	err := c.do(ctx, http.MethodGet, "/tree?"+q.Encode(), nil, &out)
	return out, err
}

// Output reads at most length bytes (capped at MaxOutputRead) of a job's
// output from offset, and the output's total size; an offset at or past
// the end reads no bytes. Only the claim's uid and root may read it.
func (c *Client) Output(ctx context.Context, id string, offset, length int64) (Output, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "length": {strconv.FormatInt(length, 10)}}
	path := "/claims/" + url.PathEscape(id) + "/output?" + q.Encode()
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return Output{}, err
	}
	defer resp.Body.Close()
	size, err := strconv.ParseInt(resp.Header.Get(OutputSizeHeader), 10, 64)
	if err != nil {
		return Output{}, fmt.Errorf("GET %s: %s: %w", path, OutputSizeHeader, err)
	}
	from := offset
	if h := resp.Header.Get(OutputOffsetHeader); h != "" {
		if from, err = strconv.ParseInt(h, 10, 64); err != nil || from < offset {
			return Output{}, fmt.Errorf("GET %s: %s %q", path, OutputOffsetHeader, h)
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxOutputRead))
	if err != nil {
		return Output{}, fmt.Errorf("GET %s: reading answer: %w", path, err)
	}
	return Output{Data: b, Size: size, Offset: from}, nil
}

// CopyOutput writes a job's output to w from byte offset to its end as it
// is at the first read (a job still writing does not keep the copy
// going), in reads of at most MaxOutputRead, waiting as the daemon asks
// when the uid's reads go over its rate. dropped, when not nil, is
// told of each range of bytes that was dropped (see Output.Offset) before
// the bytes after it are written.
func (c *Client) CopyOutput(ctx context.Context, id string, offset int64, w io.Writer, dropped func(from, to int64)) error {
	end := int64(-1)
	for {
		o, err := c.Output(ctx, id, offset, MaxOutputRead)
		if ae := (*Error)(nil); errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
			// A uid pays for the bytes it reads (a token per 64 KiB):
			// a long output is read at its rate, not refused.
			t := time.NewTimer(max(ae.RetryAfter, 100*time.Millisecond))
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
			continue
		}
		if err != nil {
			return err
		}
		if end < 0 {
			end = o.Size
		}
		if o.Offset > offset {
			if dropped != nil {
				dropped(offset, o.Offset)
			}
			offset = o.Offset
		}
		if _, err := w.Write(o.Data); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
		offset += int64(len(o.Data))
		if len(o.Data) == 0 || offset >= end {
			return nil
		}
	}
}

// ServerPid connects to the socket and returns the pid of the process
// serving it, from the connection's peer credentials (SO_PEERCRED), not
// from anything it says: a local teardown protects it.
func (c *Client) ServerPid(ctx context.Context) (int32, error) {
	conn, err := dial(ctx, c.socket)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer conn.Close()
	p, err := peerCred(conn)
	if err != nil {
		return 0, err
	}
	return p.Pid, nil
}

// dropped reports whether err says the connection ended before an answer
// began: reset, or closed (EOF) with nothing read, or closed before the
// request was sent, which net/http reports with an unexported error
// (errServerClosedIdle) known only by its text.
func dropped(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "server closed idle connection")
}
