package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The event stream: GET /v1/events answers 200 and then NDJSON, one
// record a line, until the client goes or the daemon stops. A record is a
// process event (kind fork, exec or exit: the object `supervisor events
// --json` prints, with time, and uid and claim where the daemon knows
// them), a claim event (kind claim), or a loss (kind lost: mechanism
// "stream" when this subscriber fell behind and the daemon dropped count
// records for it, another mechanism when the kernel source lost events).
// A blank line is a heartbeat. Root sees every record; another uid sees
// only the processes and claims of its own uid, and losses. The query
// ?kind=fork,exec,exit,claim keeps only those kinds (losses always come):
// a subscriber that wants few kinds then has its whole buffer for them.

// StreamHeartbeat is how often an idle stream writes a blank line, under
// half the server's idle timeout, so that its client sees it live.
const StreamHeartbeat = 4 * time.Second

// MaxStreamLine bounds one record a client reads.
const MaxStreamLine = 1 << 20

// StreamRecord is one record of the event stream, as a client decodes it.
// Only the fields of its kind are set.
type StreamRecord struct {
	Kind      string   `json:"kind"` // fork, exec, exit, lost, claim
	Mechanism string   `json:"mechanism,omitempty"`
	Time      string   `json:"time,omitempty"` // RFC 3339, when the daemon saw it
	Pid       int32    `json:"pid,omitempty"`
	PPid      int32    `json:"ppid,omitempty"`
	Tid       int32    `json:"tid,omitempty"`
	Token     string   `json:"token,omitempty"`
	Parent    string   `json:"parent_token,omitempty"`
	Comm      string   `json:"comm,omitempty"`
	Exe       string   `json:"exe,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	ExitCode  *int     `json:"exit_code,omitempty"`
	Signal    int      `json:"signal,omitempty"`
	Count     uint64   `json:"count,omitempty"` // lost
	Inferred  bool     `json:"inferred,omitempty"`
	UID       *uint32  `json:"uid,omitempty"`
	Claim     string   `json:"claim,omitempty"` // the claim the process or the claim event is of
	// A claim event's fields (kind claim).
	Action    string `json:"action,omitempty"`
	ClaimKind string `json:"claim_kind,omitempty"`
	Owner     string `json:"owner,omitempty"`
	From      string `json:"from,omitempty"`
	State     string `json:"state,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// StreamKinds is a set of record kinds a subscriber asked for; the zero
// value is every kind. Losses are always sent.
type StreamKinds uint8

// The kinds a subscriber may ask for.
const (
	StreamFork StreamKinds = 1 << iota
	StreamExec
	StreamExit
	StreamClaim
)

type kindName struct {
	name string
	k    StreamKinds
}

var streamKindNames = []kindName{{"fork", StreamFork}, {"exec", StreamExec}, {"exit", StreamExit}, {"claim", StreamClaim}}

// ParseStreamKinds parses a comma-separated list of kinds ("" is every
// kind; "lost" is accepted and always implied).
func ParseStreamKinds(s string) (StreamKinds, error) {
	if s == "" {
		return 0, nil
	}
	k := streamLostOnly
	for name := range strings.SplitSeq(s, ",") {
		if name == "lost" {
			continue
		}
		i := slices.IndexFunc(streamKindNames, func(x kindName) bool { return x.name == name })
		if i < 0 {
			return 0, fmt.Errorf("kind %q: want some of fork,exec,exit,lost,claim: %w", name, ErrBadRequest)
		}
		k |= streamKindNames[i].k
	}
	return k, nil
}

// streamLostOnly is the set of a subscriber that asked for losses only.
const streamLostOnly StreamKinds = 1 << 7

// Has reports whether the set holds kind k (every set holds them all
// when it is zero).
func (s StreamKinds) Has(k StreamKinds) bool { return s == 0 || s&k != 0 }

// String is the set as the query gives it ("" for every kind).
func (s StreamKinds) String() string {
	if s == 0 {
		return ""
	}
	names := []string{"lost"}
	for _, x := range streamKindNames {
		if s&x.k != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ",")
}

// Stream is one subscriber's view of the daemon's events.
type Stream interface {
	// Next waits until records are ready and returns them, whole NDJSON
	// lines; the slice is the caller's until the next call. It returns
	// ctx's error when ctx ends first, io.EOF when the stream is over.
	Next(ctx context.Context) ([]byte, error)
	// Close ends the subscription.
	Close()
}

// Streamer is a Backend that serves the event stream.
type Streamer interface {
	// Subscribe starts a stream of what p may see, of kinds k. It fails
	// with ErrUnavailable when the daemon has no room for another
	// subscriber.
	Subscribe(ctx context.Context, p Peer, k StreamKinds) (Stream, error)
}

// events serves GET /events. It is long-lived (Server.longLived): it
// counts among the caller's long requests and connections.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.b.(Streamer)
	if !ok {
		writeError(w, http.StatusNotFound, "this daemon has no event stream")
		return
	}
	kinds, err := ParseStreamKinds(r.URL.Query().Get("kind"))
	if err != nil {
		writeErr(w, err)
		return
	}
	st, err := sb.Subscribe(r.Context(), peer(r), kinds)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer st.Close()
	rc := http.NewResponseController(w)
	// The request has no body: no read deadline may cut the stream (the
	// server's whole-request read timeout would cancel its context).
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		// A client that reads nothing for a minute is cut off; until
		// then its subscription loses what does not fit, counted.
		_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(nil) {
		return
	}
	ctx := r.Context()
	heartbeat := []byte{'\n'}
	for {
		hctx, cancel := context.WithTimeout(ctx, StreamHeartbeat)
		b, err := st.Next(hctx)
		cancel()
		switch {
		case err == nil:
			if !write(b) {
				return
			}
		case ctx.Err() != nil, errors.Is(err, io.EOF):
			return
		case errors.Is(err, context.DeadlineExceeded):
			if !write(heartbeat) {
				return
			}
		default:
			return
		}
	}
}

// EventStream reads the daemon's event stream (Client.Events).
type EventStream struct {
	body io.ReadCloser
	r    *bufio.Reader
}

// Events opens the daemon's event stream, of kinds k (zero: all). Errors
// as Client.do's.
func (c *Client) Events(ctx context.Context, k StreamKinds) (*EventStream, error) {
	path := "/events"
	if k != 0 {
		path += "?kind=" + url.QueryEscape(k.String())
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return &EventStream{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

// Next returns the next record's line, without its newline, skipping
// heartbeats; the slice is valid until the next call. When the daemon
// ends the stream (it stopped) the error wraps ErrNoDaemon; a line over
// MaxStreamLine is an error.
func (e *EventStream) Next() ([]byte, error) {
	for {
		line, err := e.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			var long []byte
			long = append(long, line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= MaxStreamLine {
				line, err = e.r.ReadSlice('\n')
				long = append(long, line...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, fmt.Errorf("event stream: record over %d bytes", MaxStreamLine)
			}
			line = long
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("event stream ended: %w", ErrNoDaemon)
			}
			return nil, fmt.Errorf("event stream: %w", err)
		}
		line = line[:len(line)-1]
		if len(line) > 0 {
			return line, nil
		}
	}
}

// Buffered reports whether a record may be read without waiting.
func (e *EventStream) Buffered() bool { return e.r.Buffered() > 0 }

// Close ends the stream.
func (e *EventStream) Close() error { return e.body.Close() }
