package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func TestLaunchValidate(t *testing.T) {
	tok := token.Token{Start: 1, Prec: token.Ticks}
	long := strings.Repeat("a", MaxString+1)
	tests := []struct {
		name string
		r    LaunchRequest
		ok   bool
	}{
		{"minimal", LaunchRequest{Argv: []string{"true"}}, true},
		{"no argv", LaunchRequest{}, false},
		{"empty program", LaunchRequest{Argv: []string{""}}, false},
		{"long arg", LaunchRequest{Argv: []string{"a", long}}, false},
		{"bad utf8", LaunchRequest{Argv: []string{"\xff"}}, false},
		{"relative cwd", LaunchRequest{Argv: []string{"a"}, Cwd: "x"}, false},
		{"env without =", LaunchRequest{Argv: []string{"a"}, Env: []string{"X"}}, false},
		{"wall clock too long", LaunchRequest{Argv: []string{"a"}, WallClock: Duration(MaxWallClock + 1)}, false},
		{"bound job", LaunchRequest{Argv: []string{"a"}, Detach: true, Bind: true}, false},
		{"holder without bind", LaunchRequest{Argv: []string{"a"}, Holder: &Instance{Pid: 5, Token: tok}}, false},
		{"holder", LaunchRequest{Argv: []string{"a"}, Bind: true, Holder: &Instance{Pid: 5, Token: tok}}, true},
		{"holder without a token", LaunchRequest{Argv: []string{"a"}, Bind: true, Holder: &Instance{Pid: 5}}, false},
	}
	for _, tt := range tests {
		err := tt.r.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: Validate() = %v, want ErrBadRequest", tt.name, err)
		}
	}
}

func TestDurationText(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{{"1s", true}, {"0s", true}, {"-1s", false}, {"soon", false}, {strings.Repeat("1", 100) + "s", false}} {
		var d Duration
		if err := d.UnmarshalText([]byte(tt.in)); (err == nil) != tt.ok {
			t.Errorf("UnmarshalText(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}

// fakeBackend answers with the peer it was given.
type fakeBackend struct{ Backend }

func (fakeBackend) Status(ctx context.Context, p Peer) (Status, error) {
	return Status{Pid: int(p.Pid), Mechanism: "fake"}, nil
}
func (fakeBackend) Verify(ctx context.Context, p Peer, r *ClaimRequest) (verdict.Verdict, error) {
	if r.Pid == 42 {
		panic("boom")
	}
	return verdict.Verdict{Pid: r.Pid, Token: r.Token, Result: verdict.Gone}, nil
}
func (fakeBackend) Kill(ctx context.Context, p Peer, r *ClaimRequest) (actions.Outcome, error) {
	return actions.Outcome{}, ErrForbidden
}

// serve runs a Server for b on a Unix socket in a temporary directory
// until the test ends, and returns the socket's path.
func serve(t *testing.T, b Backend, onPanic func(string, []byte)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	serveOn(t, sock, NewServer(b, onPanic))
	return sock
}

// serveOn runs s on a Unix socket at sock until the test ends.
func serveOn(t *testing.T, sock string, s *Server) {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
}

// TestServerPeerAndErrors runs the server on a real Unix socket: the peer
// credentials come from SO_PEERCRED, a panicking handler answers 500 and the
// server keeps serving, a backend error maps to its status.
func TestServerPeerAndErrors(t *testing.T) {
	type panicked struct {
		msg   string
		stack []byte
	}
	panics := make(chan panicked, 1)
	sock := serve(t, fakeBackend{}, func(msg string, stack []byte) { panics <- panicked{msg, stack} })
	c := NewClient(sock)
	defer c.Close()
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil || st.Pid != os.Getpid() {
		t.Fatalf("Status() = %+v, %v, want the peer pid %d", st, err, os.Getpid())
	}
	tok := token.Token{Start: 1, Prec: token.Ticks}
	var ae *Error
	if _, err := c.Verify(ctx, 42, tok); !errors.As(err, &ae) || ae.Status != 500 {
		t.Errorf("Verify(panic) = %v, want HTTP 500", err)
	}
	select {
	case p := <-panics:
		if !strings.Contains(p.msg, "POST /v1/verify") || !strings.Contains(p.msg, "boom") {
			t.Errorf("panic hook msg = %q, want the request and the panic value", p.msg)
		}
		if !bytes.Contains(p.stack, []byte("fakeBackend.Verify")) {
			t.Errorf("panic hook stack = %q, want the panicking frame", p.stack)
		}
	default:
		t.Error("a handler panicked and the panic hook was not called")
	}
	if v, err := c.Verify(ctx, 7, tok); err != nil || v.Result != verdict.Gone {
		t.Errorf("Verify after a panic = %v, %v", v, err)
	}
	if _, err := c.Kill(ctx, 7, tok, nil); !errors.As(err, &ae) || ae.Status != 403 {
		t.Errorf("Kill = %v, want HTTP 403", err)
	}
	if _, err := NewClient(sock + "-none").Status(ctx); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Status on a missing socket = %v, want ErrNoDaemon", err)
	}
}

func FuzzDecodeLaunch(f *testing.F) {
	f.Add([]byte(`{"argv":["sleep","1"],"wall_clock":"1s","env":["A=b"]}`))
	f.Add([]byte(`{"argv":["x"],"bind":true,"holder":{"pid":1,"token":"v1:t:00000000000000000000000000000000:1:-"}}`))
	f.Add([]byte(`{"argv":["x"],"unknown":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r LaunchRequest
		if jsonx.Decode(b, MaxBodyBytes, &r) != nil {
			return
		}
		if r.Validate() == nil {
			if len(r.Argv) == 0 || len(r.Argv) > MaxArgs || r.WallClock < 0 {
				t.Fatalf("Validate accepted %+v", r)
			}
		}
	})
}

// codeBackend answers Kill with the error it holds.
type codeBackend struct {
	Backend
	err error
}

func (b codeBackend) Kill(ctx context.Context, p Peer, r *ClaimRequest) (actions.Outcome, error) {
	return actions.Outcome{}, b.err
}

// TestErrorCodes: every sentinel travels as its status and code, and the
// client's *Error answers errors.Is for it (and for no other).
func TestErrorCodes(t *testing.T) {
	tok := token.Token{Start: 1, Prec: token.Ticks}
	for _, k := range errorKinds {
		c := NewClient(serve(t, codeBackend{err: fmt.Errorf("pid 7: %w", k.err)}, nil))
		_, err := c.Kill(context.Background(), 7, tok, nil)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != k.status || ae.Code != k.code || !strings.Contains(ae.Message, "pid 7") {
			t.Errorf("Kill answering %v = %v, want HTTP %d code %s", k.err, err, k.status, k.code)
		}
		for _, o := range errorKinds {
			if got := errors.Is(err, o.err); got != (o.err == k.err) {
				t.Errorf("errors.Is(answer of %v, %v) = %v", k.err, o.err, got)
			}
		}
		c.Close()
	}
}

// TestNotTheDaemon: an HTTP server on the socket that is not this daemon
// (supervisord answers 404 "Not Found"; another may answer 200 with JSON)
// is told apart by the handshake header.
func TestNotTheDaemon(t *testing.T) {
	for _, h := range []http.Handler{
		http.NotFoundHandler(),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"pid":1,"version":"x"}`) }),
	} {
		sock := filepath.Join(t.TempDir(), "other")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(l)
		_, err = NewClient(sock).Status(context.Background())
		if !errors.Is(err, ErrNotDaemon) || !errors.Is(err, ErrNoDaemon) {
			t.Errorf("Status() from a foreign server = %v, want ErrNotDaemon (and ErrNoDaemon)", err)
		}
		srv.Close()
	}
	c := NewClient(serve(t, fakeBackend{}, nil))
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("Status() from the daemon's server = %v", err)
	}
}

// TestDuplicateKeysRefused: a request body with a key twice (or in two
// cases, which encoding/json matches to one field) is refused, not read
// as its last: {"pid":1,"pid":2} was a request about pid 2.
func TestDuplicateKeysRefused(t *testing.T) {
	sock := serve(t, fakeBackend{}, nil)
	c := NewClient(sock)
	defer c.Close()
	ctx := context.Background()
	tok := `"v1:t:00000000000000000000000000000000:1:-"`
	for _, body := range []string{
		`{"pid":7,"pid":8,"token":` + tok + `}`,
		`{"pid":7,"PID":8,"token":` + tok + `}`,
	} {
		var ae *Error
		if _, err := c.send(ctx, http.MethodPost, "/verify", json.RawMessage(body)); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "duplicate key") {
			t.Errorf("POST /verify %s = %v, want 400 naming the duplicate key", body, err)
		}
	}
	resp, err := c.send(ctx, http.MethodPost, "/verify", json.RawMessage(`{"pid":7,"token":`+tok+`}`))
	if err != nil {
		t.Fatalf("POST /verify with each key once = %v", err)
	}
	resp.Body.Close()
}
