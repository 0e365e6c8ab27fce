package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/procsupervisor/supervisor/internal/quietfile"
)

// `events --json > FILE` writes FILE raw, `events --json | jq` the pipe
// while it has room; a buffer is written as it is.
func TestQuietStdout(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "events.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := quietStdout(f).(*quietfile.Writer); !ok && quietfile.New(f) != nil {
		t.Errorf("a regular file on a local filesystem: %T, want *quietfile.Writer", quietStdout(f))
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, ok := quietStdout(w).(*quietfile.Writer); !ok {
		t.Errorf("a pipe: %T, want *quietfile.Writer", quietStdout(w))
	}
	var b bytes.Buffer
	if got := quietStdout(&b); got != &b {
		t.Errorf("a buffer: %T, want itself", got)
	}
}
