package jobout

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unsafe"

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

// Result is what Bound did to a file.
type Result struct {
	// UpTo is the offset up to which bytes were dropped now (0: none).
	UpTo int64
	// Escaped says the file had a name outside the directory (a hard
	// link its job made) and was taken back from its user: root's, no
	// ACL, mode 0.
	Escaped bool
}

// Bound frees the oldest bytes of the file at path when the disk holds
// more than limit+Slack of it, keeping at least its last limit bytes, and
// says in UpTo the offset up to which bytes are dropped. Blocks allocated
// past the file's end (fallocate --keep-size, which holds disk space
// without growing the size) are freed too. The file keeps its size (see
// the package comment). A file with more than one link is taken back from
// its user whatever its size (Escaped): the name is the daemon's, in a
// directory only root writes, so another link is one its job made
// elsewhere, through which its user would otherwise write on, outside the
// bound, after the daemon has given the file up. When Escaped is set, the
// file was taken back even if an error is returned.
func Bound(path string, limit int64) (Result, error) {
	// Looked at by name, and opened (O_PATH, then for writing through
	// /proc/self/fd: fallocate needs it) only to act.
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Result{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || (st.Nlink <= 1 && st.Blocks*512 <= limit+Slack) {
		return Result{}, nil
	}
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Result{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(pfd)
	if err := unix.Fstat(pfd, &st); err != nil {
		return Result{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Result{}, fmt.Errorf("%s: not a regular file", path)
	}
	var r Result
	over := st.Blocks*512 > limit+Slack
	fd := -1
	if st.Nlink > 1 {
		r.Escaped = true
		if fd, err = takeBack(pfd, over); err != nil {
			return r, fmt.Errorf("taking back %s, linked elsewhere: %w", path, err)
		}
	} else {
		// Where the file is its user's (a filesystem without ACLs) and
		// the daemon has no CAP_DAC_OVERRIDE (the packaged unit), this
		// fails with EACCES: Watch reports it, the file unbounded.
		fd, err = unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return r, fmt.Errorf("open %s: %w", path, err)
		}
	}
	if fd < 0 {
		return r, nil
	}
	defer unix.Close(fd)
	blk := max(int64(st.Blksize), 512)
	const punch = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	if st.Blocks*512 > st.Size+limit+Slack {
		// More held than the size explains: blocks allocated past the
		// end (fallocate --keep-size), which no hole punch reaches
		// (ext4 punches within the size only). A truncate to the size
		// frees them; the size is read again just before, and what the
		// job appends in between is lost (only a job that allocates
		// past its end gets here).
		if err := unix.Fstat(fd, &st); err != nil {
			return r, fmt.Errorf("stat %s: %w", path, err)
		}
		if err := unix.Ftruncate(fd, st.Size); err != nil {
			return r, fmt.Errorf("truncate %s to its size: %w", path, err)
		}
	}
	end := (st.Size - limit) / blk * blk
	if end <= 0 {
		return r, nil
	}
	err = unix.Fallocate(fd, punch, 0, end)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return truncate(fd, path, r, st.Size)
	}
	if err != nil {
		return r, fmt.Errorf("punch %s: %w", path, err)
	}
	r.UpTo = end
	return r, nil
}

// truncate empties a file where holes cannot be punched.
func truncate(fd int, path string, r Result, size int64) (Result, error) {
	if err := unix.Ftruncate(fd, 0); err != nil {
		return r, fmt.Errorf("truncate %s: %w", path, err)
	}
	r.UpTo = size
	return r, nil
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

// Reports are what Watch tells of the files it looks at; each may be nil.
type Reports struct {
	// Bounded is told of each file whose bytes were dropped: its path and
	// the offset dropped up to.
	Bounded func(path string, upTo int64)
	// Escaped is told of each file found with a name outside the
	// directory and taken back from its user (Result.Escaped), at every
	// look that finds it so.
	Escaped func(path string)
	// Failed is told of each look at a file that failed (but for the
	// file gone meanwhile): the file is not bounded, and the next look
	// tries again. It is told each time.
	Failed func(path string, err error)
}

// Watch bounds the files of dir whose names end in suffix to limit bytes
// each, as they are written, until ctx ends, and tells rep what it did.
// The directory must exist.
func Watch(ctx context.Context, dir, suffix string, limit int64, rep Reports) error {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	// The descriptor waits in the runtime's netpoller, its events read
	// without telling the runtime of a system call (a read of a
	// non-blocking inotify descriptor never blocks): a blocking poll of
	// its own (up to a second each) made the runtime wake its sysmon
	// thread at each return and retake the thread's P, and an awake
	// sysmon ticks every 20 µs while the daemon works (a third of the
	// daemon's CPU under an exec storm on a host where a wake-up costs
	// tens of µs). The timer for the sweep and the pending looks is a
	// read deadline; ctx's end closes the file.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("inotify non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("inotify: %w", err)
	}
	every := sweepEvery
	stop := context.AfterFunc(ctx, func() { f.Close() })
	go func() {
		defer stop()
		defer f.Close()
		w := watcher{dir: dir, suffix: suffix, limit: limit, rep: rep,
			last: map[string]time.Time{}, pending: map[string]bool{}}
		buf := make([]byte, 64<<10)
		var n int
		read := func(fd uintptr) bool {
			r, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			if errno == unix.EAGAIN {
				return false // wait in the netpoller
			}
			n = int(r)
			if errno != 0 {
				n = 0
			}
			return true
		}
		nextSweep := time.Now().Add(every)
		for ctx.Err() == nil {
			// Woken by events, by a file pending once its gap is over,
			// by the sweep, and by ctx's end.
			wait := time.Until(nextSweep)
			if len(w.pending) > 0 {
				wait = minGap
			}
			n = 0
			if f.SetReadDeadline(time.Now().Add(max(wait, 0))) != nil {
				return // closed
			}
			if err := rc.Read(read); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return // closed: ctx ended
			}
			if w.events(buf[:n]) {
				w.sweep()
				nextSweep = time.Now().Add(every)
			}
			// After every read, not only when none came: a directory
			// kept busy by one job starved the others' pending looks and
			// the sweep.
			w.due()
			if !time.Now().Before(nextSweep) {
				w.sweep()
				nextSweep = time.Now().Add(every)
			}
			// Events pile up (and those of a file written again merge)
			// while this sleeps: a job writing a byte at a time costs a
			// read each batchGap, not one each write.
			if n > 0 {
				time.Sleep(batchGap)
			}
		}
	}()
	return nil
}

// watcher is Watch's state, its goroutine's alone.
type watcher struct {
	dir, suffix string
	limit       int64
	rep         Reports
	last        map[string]time.Time // when each file was looked at
	pending     map[string]bool      // written since, within minGap
}

// batchGap is the pause after each read of events.
const batchGap = 10 * time.Millisecond

// events looks at the files named by a read of inotify events, and
// reports whether the queue overflowed (then every file is to be looked
// at).
func (w *watcher) events(b []byte) (overflow bool) {
	// A read holds many events of the same few files (a job writing a
	// byte at a time, beside others): each file is looked at once.
	var seen [8][]byte
	nseen := 0
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		// struct inotify_event: wd, mask, cookie, len, name.
		mask := binary.NativeEndian.Uint32(b[off+4:])
		size := binary.NativeEndian.Uint32(b[off+12:])
		start := off + unix.SizeofInotifyEvent
		// Compared before it is added: a len of 2 GiB or more would make
		// a negative int where int is 32 bits.
		if uint64(size) > uint64(len(b)-start) {
			break
		}
		off = start + int(size)
		if mask&unix.IN_Q_OVERFLOW != 0 {
			overflow = true
			continue
		}
		name := b[start:off]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		dup := false
		for _, n := range seen[:nseen] {
			if bytes.Equal(n, name) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if nseen < len(seen) {
			seen[nseen] = name
			nseen++
		}
		w.look(name)
	}
	return overflow
}

// look bounds the file name, or marks it pending when it was looked at
// less than minGap ago.
func (w *watcher) look(name []byte) {
	if !bytes.HasSuffix(name, []byte(w.suffix)) || bytes.IndexByte(name, '/') >= 0 {
		return
	}
	if t, ok := w.last[string(name)]; ok && time.Since(t) < minGap {
		if !w.pending[string(name)] {
			w.pending[string(name)] = true
		}
		return
	}
	n := string(name)
	w.last[n] = time.Now()
	delete(w.pending, n)
	path := filepath.Join(w.dir, n)
	r, err := Bound(path, w.limit)
	if r.Escaped && w.rep.Escaped != nil {
		w.rep.Escaped(path)
	}
	if r.UpTo > 0 && w.rep.Bounded != nil {
		w.rep.Bounded(path, r.UpTo)
	}
	// Told, not dropped: a file the daemon cannot open for writing (its
	// user's, on a filesystem without ACLs, under a unit without
	// CAP_DAC_OVERRIDE) was left unbounded and nothing said so. A file
	// removed between its event and this look is no failure.
	if err != nil && !errors.Is(err, unix.ENOENT) && w.rep.Failed != nil {
		w.rep.Failed(path, err)
	}
}

// due looks at the pending files whose gap is over.
func (w *watcher) due() {
	for n := range w.pending {
		if time.Since(w.last[n]) >= minGap {
			w.look([]byte(n))
		}
	}
}

// sweep looks at every file, and forgets the files gone.
func (w *watcher) sweep() {
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return
	}
	seen := make(map[string]time.Time, len(ents))
	for _, e := range ents {
		w.look([]byte(e.Name()))
		if t, ok := w.last[e.Name()]; ok {
			seen[e.Name()] = t
		}
	}
	w.last = seen
	for n := range w.pending {
		if _, ok := seen[n]; !ok {
			delete(w.pending, n)
		}
	}
}
