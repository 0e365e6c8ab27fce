package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/jobout"
)

// Output implements api.Backend: a bounded read of a job's output file for
// the claim's uid and root (to anyone else the claim does not exist, as in
// Get). The file is the one the stored claim names, and only if it lies in
// the daemon's jobs directory; it is opened without following a symbolic
// link and without blocking (a FIFO would), and must be a regular file.
// The job owns the file and may truncate it: a read that finds less than
// the size it saw answers the bytes there were.
func (d *Daemon) Output(ctx context.Context, p api.Peer, id string, offset, length int64) (api.Output, error) {
	c, err := d.st.Get(id)
	if err != nil {
		return api.Output{}, claimErr(id, err)
	}
	if !may(p, &c) {
		return api.Output{}, fmt.Errorf("claim %s: %w", id, api.ErrNotFound)
	}
	if c.OutputPath == "" {
		return api.Output{}, fmt.Errorf("claim %s keeps no output (a job does): %w", id, api.ErrNotFound)
	}
	if !d.ownOutput(&c) {
		return api.Output{}, fmt.Errorf("claim %s: output path %q is not its own in %s", id, c.OutputPath, filepath.Join(d.cfg.StateDir, "jobs"))
	}
	f, err := os.OpenFile(c.OutputPath, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return api.Output{}, fmt.Errorf("claim %s: its output is gone: %w", id, api.ErrNotFound)
	}
	if err != nil {
		return api.Output{}, fmt.Errorf("claim %s: %w", id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return api.Output{}, fmt.Errorf("claim %s: %w", id, err)
	}
	if !st.Mode().IsRegular() {
		return api.Output{}, fmt.Errorf("claim %s: output %s is a %v, not a file", id, c.OutputPath, st.Mode().Type())
	}
	size := st.Size()
	if offset >= size {
		return api.Output{Size: size, Offset: offset}, nil
	}
	// Past bytes dropped to bound the file (internal/jobout). A hole
	// punched while this reads would read as NULs: the data's start is
	// asked again after the read, and the read done again from there.
	var buf []byte
	for try := 0; ; try++ {
		from := jobout.DataFrom(f, offset, size)
		if from >= size {
			return api.Output{Size: size, Offset: size}, nil
		}
		buf = make([]byte, min(length, size-from, api.MaxOutputRead))
		n, err := f.ReadAt(buf, from)
		if err != nil && !errors.Is(err, io.EOF) {
			return api.Output{}, fmt.Errorf("claim %s: reading output: %w", id, err)
		}
		buf = buf[:n]
		if again := jobout.DataFrom(f, from, size); again == from || try == 2 {
			return api.Output{Data: buf, Size: size, Offset: from}, nil
		}
	}
}
