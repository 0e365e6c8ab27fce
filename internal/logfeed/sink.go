package logfeed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/procsupervisor/supervisor/internal/quietfile"
)

// sink is where the drain goroutine writes lines. Only the drain goroutine
// calls write, flush and reopen; close is called after it ended, or to
// unblock it. A sink may buffer: delivered counts the lines that reached
// the output during the call, lost those (including earlier buffered ones)
// that never will.
type sink interface {
	write(line []byte, sev severity, action string) (delivered, lost int, err error)
	flush() (delivered, lost int, err error)
	reopen() error
	close() error
}

// streamBatch is how many bytes a stream sink gathers before a write.
const streamBatch = 64 << 10

// errSinkClosed is returned by a sink written after Close.
var errSinkClosed = errors.New("log output closed")

// streamSink writes lines to a stream (stdout, a Writer, a file), in
// batches cut at line boundaries and written when the batch is full or the
// queue runs empty.
type streamSink struct {
	w     io.Writer // nil while a file is not open
	buf   []byte
	lines int
	file  *fileOut // nil unless the output is a file
}

func newStreamSink(w io.Writer, f *fileOut) *streamSink {
	return &streamSink{w: w, file: f, buf: make([]byte, 0, streamBatch)}
}

func (s *streamSink) write(line []byte, _ severity, _ string) (delivered, lost int, err error) {
	if s.file.rotates() && s.file.size+int64(len(s.buf)+len(line)) > s.file.max &&
		s.file.size+int64(len(s.buf)) > 0 {
		delivered, lost, err = s.flush()
		if err == nil {
			err = s.rotate()
		}
		if err != nil {
			return delivered, lost + 1, err
		}
	}
	s.buf = append(s.buf, line...)
	s.lines++
	if len(s.buf) >= streamBatch {
		d, l, err := s.flush()
		return delivered + d, lost + l, err
	}
	return delivered, lost, nil
}

func (s *streamSink) flush() (delivered, lost int, err error) {
	if len(s.buf) == 0 {
		return 0, 0, nil
	}
	defer func() { s.buf, s.lines = s.buf[:0], 0 }()
	return s.out(s.buf, s.lines)
}

// writeRun implements runWriter: lines that fit the batch buffer join it;
// a larger run goes to the output in one write after what is buffered. A
// run that would cross the rotation size goes line by line.
func (s *streamSink) writeRun(p []byte, lines int) (delivered, lost int, err error) {
	if s.file.rotates() && s.file.size+int64(len(s.buf)+len(p)) > s.file.max {
		for len(p) > 0 {
			var line []byte
			line, p = nextLine(p)
			d, l, err := s.write(line, sevInfo, "")
			delivered, lost = delivered+d, lost+l
			if err != nil {
				return delivered, lost + bytesLines(p), err
			}
		}
		return delivered, lost, nil
	}
	if len(s.buf)+len(p) <= streamBatch {
		s.buf = append(s.buf, p...)
		s.lines += lines
		return 0, 0, nil
	}
	delivered, lost, err = s.flush()
	if err != nil {
		return delivered, lost + lines, err
	}
	d, l, err := s.out(p, lines)
	return delivered + d, lost + l, err
}

// bytesLines counts the lines in p.
func bytesLines(p []byte) int { return bytes.Count(p, []byte{'\n'}) }

// out writes p, which holds lines whole lines, to the output.
func (s *streamSink) out(p []byte, lines int) (delivered, lost int, err error) {
	if s.w == nil {
		if err := s.reopen(); err != nil {
			return 0, lines, err
		}
	}
	n, err := s.w.Write(p)
	if s.file != nil {
		s.file.size += int64(n)
	}
	if err != nil {
		lost = bytesLines(p[n:])
		return lines - lost, lost, fmt.Errorf("write log: %w", err)
	}
	return lines, 0, nil
}

func (s *streamSink) rotate() error {
	if err := s.file.rotate(); err != nil {
		s.w = nil
		return err
	}
	s.w = s.file.writer()
	return nil
}

func (s *streamSink) reopen() error {
	if s.file == nil {
		return nil
	}
	if err := s.file.open(); err != nil {
		s.w = nil
		return err
	}
	s.w = s.file.writer()
	return nil
}

func (s *streamSink) close() error {
	if s.file == nil {
		// stdout: never closed, but what its Writer opened is.
		if q, ok := s.w.(*quietfile.Writer); ok {
			return q.Close()
		}
		return nil
	}
	return s.file.close()
}

// fileOut is a log file with size-based rotation: PATH is renamed to
// PATH.1, PATH.1 to PATH.2 and so on up to PATH.<backups>, and a new PATH
// is opened. A PATH that is not a regular file (a device such as
// /dev/null, a FIFO) is written as a stream and never rotated: rotating
// /dev/null renamed the device and put a regular file in its place.
type fileOut struct {
	mu      sync.Mutex // f and closed: close may run while the drain writes
	closed  bool
	path    string
	f       *os.File
	size    int64
	max     int64       // <= 0: no rotation
	backups int         // <= 0: keep no rotated file
	special atomic.Bool // the open PATH is not a regular file
	// quiet writes f without a word to the runtime when the write cannot
	// wait (and so without waking its sysmon thread), nil when quietfile
	// has no Writer for f (a regular file on a remote filesystem).
	quiet *quietfile.Writer
}

// rotates reports whether fo (nil: not a file) is rotated by size.
func (fo *fileOut) rotates() bool {
	return fo != nil && fo.max > 0 && !fo.special.Load()
}

func openFile(path string, max int64, backups int) (*fileOut, error) {
	fo := &fileOut{path: path, max: max, backups: backups}
	if err := fo.open(); err != nil {
		return nil, err
	}
	return fo, nil
}

// open (re)opens the path for appending, as after logrotate moved it.
func (fo *fileOut) open() error {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return fo.openLocked()
}

func (fo *fileOut) openLocked() error {
	if fo.closed {
		return errSinkClosed
	}
	if fo.f != nil {
		fo.f.Close()
		fo.f, fo.quiet = nil, nil
	}
	// Not through a symlink: the daemon checks the directory once, at
	// start, and a link put there later is not followed. Non-blocking:
	// a FIFO without a reader fails at once (ENXIO) instead of holding
	// the feed, and the daemon's stop, until one comes (the runtime's
	// poller still waits for room in one that has a reader).
	f, err := os.OpenFile(fo.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o640)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log file: %w", err)
	}
	fo.f, fo.size = f, st.Size()
	fo.special.Store(!st.Mode().IsRegular())
	fo.quiet = quietfile.New(f)
	return nil
}

func (fo *fileOut) rotate() error {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	if fo.closed {
		return errSinkClosed
	}
	if fo.special.Load() {
		return nil // never rename or remove a device or a FIFO
	}
	if fo.f != nil {
		fo.f.Close()
		fo.f, fo.quiet = nil, nil
	}
	if fo.backups <= 0 {
		if err := os.Remove(fo.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate log file: %w", err)
		}
		return fo.openLocked()
	}
	for i := fo.backups - 1; i >= 1; i-- {
		err := os.Rename(fo.path+"."+strconv.Itoa(i), fo.path+"."+strconv.Itoa(i+1))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate log file: %w", err)
		}
	}
	if err := os.Rename(fo.path, fo.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate log file: %w", err)
	}
	return fo.openLocked()
}

// writer returns the open file's writer (its quietfile.Writer when it
// has one), nil when none is open.
func (fo *fileOut) writer() io.Writer {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	switch {
	case fo.f == nil:
		return nil
	case fo.quiet != nil:
		return fo.quiet
	}
	return fo.f
}

func (fo *fileOut) close() error {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	fo.closed = true
	if fo.f == nil {
		return nil
	}
	err := fo.f.Close()
	fo.f, fo.quiet = nil, nil
	return err
}

// openSink opens the output a Config names.
func openSink(out Output, cfg Config, hostname string) (sink, error) {
	switch out.Kind {
	case OutputStdout:
		return newStreamSink(quietfile.For(os.Stdout), nil), nil
	case OutputFile:
		fo, err := openFile(out.Path, cfg.MaxFileBytes, cfg.MaxBackups)
		if err != nil {
			return nil, err
		}
		return newStreamSink(fo.writer(), fo), nil
	case OutputSyslog:
		return newSyslogSink(out, hostname), nil
	}
	return nil, fmt.Errorf("output kind %q: %w", out.Kind, ErrConfig)
}
