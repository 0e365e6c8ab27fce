package jobout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Slack is how far past its bound a file grows before bytes are freed, so
// that a steady writer is not punched at every write.
const Slack = 1 << 20

// minGap is the least time between two looks at one file.
const minGap = 50 * time.Millisecond

// sweepEvery is how often every file is looked at, written or not: a
// file written through a shared mapping tells inotify nothing. (A
// variable for the tests.)
var sweepEvery = 10 * time.Second

// block is the alignment of a punched range: a filesystem frees only
// whole blocks.
const block = 4096

// Bound frees the oldest bytes of the file at path when the disk holds
// more than max+Slack of it, keeping at least its last max bytes, and
// returns the offset up to which bytes are dropped (0 when nothing was
// freed now). The file keeps its size (see the package comment).
func Bound(path string, max int64) (int64, error) {
	// Looked at read-only (its close is no write, which the watch would
	// see), and opened for writing only to free bytes.
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Blocks*512 <= max+Slack {
		return 0, nil
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	// Its links do not matter: the name is the daemon's, in a directory
	// only root writes, so the file is the one it created for the job,
	// and a user who linked it elsewhere to escape the bound bounds its
	// own file.
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	end := (st.Size - max) &^ (block - 1)
	if end <= 0 {
		return 0, nil
	}
	err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, end)
	if errors.Is(err, unix.EOPNOTSUPP) {
		if err := unix.Ftruncate(fd, 0); err != nil {
			return 0, fmt.Errorf("truncate %s: %w", path, err)
		}
		return st.Size, nil
	}
	if err != nil {
		return 0, fmt.Errorf("punch %s: %w", path, err)
	}
	return end, nil
}

// DataFrom returns the first offset at or after offset where f holds
// data: offset itself, a later one past bytes Bound dropped, or the file's
// size when there is none.
func DataFrom(f *os.File, offset, size int64) int64 {
	n, err := unix.Seek(int(f.Fd()), offset, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO): // a hole up to the end
		return size
	case err != nil || n < offset:
		return offset
	}
	return min(n, size)
}

// Watch bounds the files of dir whose names end in suffix to max bytes
// each, as they are written, until ctx ends; bounded, when not nil, is
// told of each file whose bytes were dropped (its path and the offset
// dropped up to). The directory must exist.
func Watch(ctx context.Context, dir, suffix string, max int64, bounded func(path string, upTo int64)) error {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		return fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: reads wait in the poller
	every := sweepEvery
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		last := map[string]time.Time{} // when each file was looked at
		pending := map[string]bool{}   // written since, within minGap
		look := func(name string) {
			if !strings.HasSuffix(name, suffix) || strings.ContainsRune(name, '/') {
				return
			}
			if t, ok := last[name]; ok && time.Since(t) < minGap {
				pending[name] = true
				return
			}
			last[name] = time.Now()
			delete(pending, name)
			if upTo, err := Bound(filepath.Join(dir, name), max); err == nil && upTo > 0 && bounded != nil {
				bounded(filepath.Join(dir, name), upTo)
			}
		}
		sweep := func() {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				look(e.Name())
			}
		}
		buf := make([]byte, 64<<10)
		nextSweep := time.Now().Add(every)
		for {
			// A file written again too soon is looked at once its
			// gap is over, even if nothing writes it after; every
			// file, at each sweep.
			deadline := nextSweep
			if len(pending) > 0 {
				deadline = time.Now().Add(minGap)
			}
			f.SetReadDeadline(deadline)
			n, err := f.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				for name := range pending {
					look(name)
				}
				if !time.Now().Before(nextSweep) {
					sweep()
					nextSweep = time.Now().Add(every)
				}
				continue
			}
			if err != nil {
				return // closed: ctx ended
			}
			overflow := false
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				// struct inotify_event: wd, mask, cookie, len, name.
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				size := int(binary.NativeEndian.Uint32(buf[off+12:]))
				start := off + unix.SizeofInotifyEvent
				off = start + size
				if off > n {
					break
				}
				if mask&unix.IN_Q_OVERFLOW != 0 {
					overflow = true
					continue
				}
				look(strings.TrimRight(string(buf[start:off]), "\x00"))
			}
			if overflow {
				sweep()
			}
			if len(last) > 4096 { // names of files long gone
				for k, t := range last {
					if time.Since(t) > time.Minute && !pending[k] {
						delete(last, k)
					}
				}
			}
		}
	}()
	return nil
}
