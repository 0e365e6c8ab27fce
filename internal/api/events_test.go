package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// chanStream is a Stream fed by a channel; closing the channel ends it.
type chanStream struct {
	c      chan []byte
	closed *atomic.Bool
}

func (s chanStream) Next(ctx context.Context) ([]byte, error) {
	select {
	case b, ok := <-s.c:
		if !ok {
			return nil, io.EOF
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (s chanStream) Close() { s.closed.Store(true) }

type streamBackend struct {
	fakeBackend
	s     chanStream
	peer  chan Peer
	kinds chan StreamKinds
}

func (b streamBackend) Subscribe(_ context.Context, p Peer, k StreamKinds) (Stream, error) {
	if b.kinds != nil {
		b.kinds <- k
	}
	b.peer <- p
	return b.s, nil
}

// TestEventStream: the client reads the records a subscription gives, in
// order, a line each, with the caller's peer credentials; the stream's
// end is the daemon gone (ErrNoDaemon); a client that leaves closes the
// subscription; a backend without a stream answers 404.
func TestEventStream(t *testing.T) {
	closed := &atomic.Bool{}
	b := streamBackend{s: chanStream{c: make(chan []byte, 4), closed: closed}, peer: make(chan Peer, 4)}
	sock := serve(t, b, nil)
	c := NewClient(sock)
	defer c.Close()
	ctx := context.Background()
	st, err := c.Events(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := <-b.peer; p.UID != 0 && p.Pid == 0 {
		t.Errorf("Subscribe got peer %+v", p)
	}
	b.s.c <- []byte("{\"kind\":\"fork\"}\n\n{\"kind\":\"exit\"}\n")
	b.s.c <- []byte("{\"kind\":\"lost\",\"count\":2}\n")
	for _, want := range []string{`{"kind":"fork"}`, `{"kind":"exit"}`, `{"kind":"lost","count":2}`} {
		line, err := st.Next()
		if err != nil || string(line) != want {
			t.Fatalf("Next() = %q, %v, want %q", line, err, want)
		}
	}
	close(b.s.c)
	if _, err := st.Next(); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Next after the end = %v, want ErrNoDaemon", err)
	}
	testenv.Eventually(t, 10*time.Second, closed.Load, "the subscription was not closed after its end")

	// A client that leaves ends the subscription.
	closed.Store(false)
	b2 := streamBackend{s: chanStream{c: make(chan []byte), closed: closed}, peer: make(chan Peer, 1)}
	sock2 := serve(t, b2, nil)
	c2 := NewClient(sock2)
	defer c2.Close()
	st2, err := c2.Events(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	st2.Close()
	testenv.Eventually(t, 10*time.Second, closed.Load, "the subscription outlived its client")

	c3 := NewClient(serve(t, fakeBackend{}, nil))
	defer c3.Close()
	var ae *Error
	if _, err := c3.Events(ctx, 0); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("Events on a backend without a stream = %v, want HTTP 404", err)
	}
}

// TestStreamKinds: ?kind= reaches the backend as the set the client
// asked for; an unknown kind is a 400 and subscribes nothing.
func TestStreamKinds(t *testing.T) {
	tests := []struct {
		in   string
		want StreamKinds
		bad  bool
	}{
		{"", 0, false},
		{"exit", StreamExit | streamLostOnly, false},
		{"fork,exit,lost", StreamFork | StreamExit | streamLostOnly, false},
		{"lost", streamLostOnly, false},
		{"claim,exec", StreamClaim | StreamExec | streamLostOnly, false},
		{"exits", 0, true},
		{"exit,", 0, true},
	}
	for _, tt := range tests {
		k, err := ParseStreamKinds(tt.in)
		if tt.bad != (err != nil) || !tt.bad && k != tt.want {
			t.Errorf("ParseStreamKinds(%q) = %v, %v; want %v (error %v)", tt.in, k, err, tt.want, tt.bad)
		}
		if err == nil {
			if back, err := ParseStreamKinds(k.String()); err != nil || back != k {
				t.Errorf("ParseStreamKinds(%q.String() = %q) = %v, %v", tt.in, k.String(), back, err)
			}
		}
	}
	if !StreamKinds(0).Has(StreamClaim) || (StreamExit | streamLostOnly).Has(StreamFork) {
		t.Error("Has: the zero set must hold every kind, a set only its own")
	}

	b := streamBackend{s: chanStream{c: make(chan []byte), closed: &atomic.Bool{}}, peer: make(chan Peer, 2), kinds: make(chan StreamKinds, 2)}
	c := NewClient(serve(t, b, nil))
	defer c.Close()
	ctx := context.Background()
	st, err := c.Events(ctx, StreamExit|StreamClaim|streamLostOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := <-b.kinds; got != StreamExit|StreamClaim|streamLostOnly {
		t.Errorf("the backend was asked for %q, want lost,exit,claim", got)
	}
	resp, err := c.send(ctx, http.MethodGet, "/events?kind=exit,bogus", nil)
	var ae *Error
	if err == nil {
		resp.Body.Close()
	}
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || len(b.kinds) != 0 {
		t.Errorf("?kind=exit,bogus = %v, want HTTP 400 and no subscription", err)
	}
}

// FuzzEventStreamNext: whatever the body, Next returns lines that are not
// empty and hold no newline, or an error, and never more than it read.
func FuzzEventStreamNext(f *testing.F) {
	f.Add([]byte("{\"kind\":\"fork\"}\n\n\n{\"kind\":\"exit\"}\n"))
	f.Add([]byte("no newline at the end"))
	f.Add(bytes.Repeat([]byte("x"), 70<<10))
	f.Fuzz(func(t *testing.T, body []byte) {
		e := &EventStream{body: io.NopCloser(nil), r: bufio.NewReaderSize(bytes.NewReader(body), 16)}
		total := 0
		for {
			line, err := e.Next()
			if err != nil {
				return
			}
			if len(line) == 0 || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("Next() = %q", line)
			}
			total += len(line) + 1
			if total > len(body) {
				t.Fatalf("read %d bytes of a body of %d", total, len(body))
			}
		}
	})
}
