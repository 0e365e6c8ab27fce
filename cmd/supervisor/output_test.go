package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
)

// outputBackend serves a fixed output, as the daemon's Output reads it.
type outputBackend struct {
	api.Backend
	data []byte
}

func (b outputBackend) Output(_ context.Context, _ api.Peer, id string, offset, length int64) (api.Output, error) {
	if id != "j-abcdefghijkl" {
		return api.Output{}, fmt.Errorf("claim %s: %w", id, api.ErrNotFound)
	}
	size := int64(len(b.data))
	if offset >= size {
		return api.Output{Size: size}, nil
	}
	return api.Output{Data: b.data[offset:min(size, offset+length)], Size: size}, nil
}

// TestCLIOutput prints an output longer than one read, whole and from
// offsets, against an API server with a fake backend.
func TestCLIOutput(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (api.MaxOutputRead*5/2)/16)
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(outputBackend{data: data}, nil)
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	for _, tt := range []struct {
		args []string
		code int
		want []byte
	}{
		{[]string{"j-abcdefghijkl"}, exitOK, data},
		{[]string{"--offset", "17", "j-abcdefghijkl"}, exitOK, data[17:]},
		{[]string{"--offset", fmt.Sprint(len(data) + 5), "j-abcdefghijkl"}, exitOK, nil},
		{[]string{"j-bbbbbbbbbbbb"}, exitNoProcess, nil},
		{[]string{"--offset", "-1", "j-abcdefghijkl"}, exitUsage, nil},
		{[]string{}, exitUsage, nil},
	} {
		code, out, errs := cli(t, append([]string{"output", "--socket", sock}, tt.args...)...)
		if code != tt.code || !bytes.Equal([]byte(out), tt.want) {
			t.Errorf("output %q = %d, %d bytes (%.80q), want %d, %d bytes", tt.args, code, len(out), errs, tt.code, len(tt.want))
		}
	}
}
