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
