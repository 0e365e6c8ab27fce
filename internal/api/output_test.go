package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// outputFake records the bounds the server passed to Output.
type outputFake struct {
	fakeBackend
	got chan [2]int64
}

func (b outputFake) Output(_ context.Context, _ Peer, _ string, offset, length int64) (Output, error) {
	b.got <- [2]int64{offset, length}
	return Output{Data: []byte("abc"), Size: 42}, nil
}

// TestOutputQuery: the offset and length of an output read are checked,
// the length defaults to and is capped at MaxOutputRead, and the answer
// is the bytes with the total size in a header.
func TestOutputQuery(t *testing.T) {
	b := outputFake{got: make(chan [2]int64, 1)}
	sock := filepath.Join(t.TempDir(), "s")
	serveOn(t, sock, NewServer(b, nil))
	c := NewClient(sock)
	defer c.Close()
	ctx := context.Background()
	for _, tt := range []struct {
		query        string
		offset, size int64
	}{
		{"", 0, MaxOutputRead},
		{"?offset=5&length=10", 5, 10},
		{"?length=99999999", 0, MaxOutputRead},
		{"?length=0", 0, 0}, // the size alone: it had read a byte
	} {
		resp, err := c.send(ctx, http.MethodGet, "/claims/j-abcdefghijkl/output"+tt.query, nil)
		if err != nil {
			t.Errorf("GET output%s = %v", tt.query, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := <-b.got
		if got != [2]int64{tt.offset, tt.size} || string(body) != "abc" ||
			resp.Header.Get(OutputSizeHeader) != "42" || resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("GET output%s = %v %q %v, want the backend asked (%d, %d), the bytes and size 42", tt.query, got, body, resp.Header, tt.offset, tt.size)
		}
	}
	for _, q := range []string{"?offset=-1", "?length=x", "?offset=1e3"} {
		var ae *Error
		if _, err := c.send(ctx, http.MethodGet, "/claims/j-abcdefghijkl/output"+q, nil); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("GET output%s = %v, want 400", q, err)
		}
	}
	if o, err := c.Output(ctx, "j-abcdefghijkl", 3, 7); err != nil || string(o.Data) != "abc" || o.Size != 42 || <-b.got != [2]int64{3, 7} {
		t.Errorf("Output() = %+v, %v", o, err)
	}
	var ae *Error
	if _, err := c.Output(ctx, "../x", 0, 1); !errors.As(err, &ae) || !strings.Contains(ae.Message, "malformed") {
		t.Errorf("Output(bad id) = %v, want 400 malformed", err)
	}
}

// bigOutput answers MaxOutputRead bytes to every read.
type bigOutput struct{ fakeBackend }

func (bigOutput) Output(context.Context, Peer, string, int64, int64) (Output, error) {
	return Output{Data: make([]byte, MaxOutputRead), Size: 1 << 30}, nil
}

// TestOutputChargedByBytes: a read of a job's output costs a uid a token
// per 64 KiB it answered beside its request's one, so with a burst of 10
// its third read of 256 KiB is refused (429) until it has paid; root is
// not charged. Before, every read cost one token whatever it sent.
func TestOutputChargedByBytes(t *testing.T) {
	s := NewServer(bigOutput{}, nil, WithLimits(Limits{Rate: 0.01, Burst: 10}))
	user := serveAs(t, s.Handler(), Peer{UID: 1000})
	root := serveAs(t, s.Handler(), Peer{UID: 0})
	ctx := context.Background()
	for i := range 2 {
		if _, err := user.Output(ctx, "j-abcdefghijkl", 0, MaxOutputRead); err != nil {
			t.Fatalf("uid 1000's read #%d: %v", i+1, err)
		}
	}
	var ae *Error
	if _, err := user.Output(ctx, "j-abcdefghijkl", 0, MaxOutputRead); !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Errorf("uid 1000's third read of %d bytes = %v, want 429, over its rate", MaxOutputRead, err)
	}
	for range 5 {
		if _, err := root.Output(ctx, "j-abcdefghijkl", 0, MaxOutputRead); err != nil {
			t.Fatalf("root's read: %v", err)
		}
	}
}

// sizedOutput is an output of size bytes, read as asked.
type sizedOutput struct {
	fakeBackend
	size int64
}

func (b sizedOutput) Output(_ context.Context, _ Peer, _ string, offset, length int64) (Output, error) {
	n := max(0, min(length, b.size-offset))
	return Output{Data: make([]byte, n), Size: b.size, Offset: offset}, nil
}

// TestCopyOutputWaitsItsRate: a user's copy of an output longer than its
// burst pays for it is not refused: the client waits as the 429 says and
// reads on, to the end.
func TestCopyOutputWaitsItsRate(t *testing.T) {
	const size = 12 * MaxOutputRead // 60 tokens, against a burst of 10
	s := NewServer(sizedOutput{size: size}, nil, WithLimits(Limits{Rate: 50, Burst: 10}))
	user := serveAs(t, s.Handler(), Peer{UID: 1000})
	var n countWriter
	if err := user.CopyOutput(context.Background(), "j-abcdefghijkl", 0, &n, nil); err != nil || n != size {
		t.Errorf("uid 1000's copy of %d bytes = %d bytes, %v; want all of it", size, n, err)
	}
}

type countWriter int64

func (w *countWriter) Write(b []byte) (int, error) {
	*w += countWriter(len(b))
	return len(b), nil
}
