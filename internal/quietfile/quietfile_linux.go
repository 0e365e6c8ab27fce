package quietfile

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Writer writes to one file, raw when it can (see the package comment).
// One goroutine at a time may call Write.
type Writer struct {
	f  *os.File
	rc syscall.RawConn
	// nowait: f is not a regular file, and is written with RWF_NOWAIT.
	nowait bool
	// pipe is f's pipe opened anew, non-blocking and in the runtime's
	// poller (nil unless f is a blocking pipe): the writes go there and
	// wait for room in the poller, not in a system call.
	pipe *os.File
	// noRaw: the kernel cannot write f without waiting (RWF_NOWAIT was
	// refused): every write goes through the runtime.
	noRaw bool
	// loudUntil: writes go through the runtime until then.
	loudUntil time.Time
	// raw counts the bytes written raw, for the tests.
	raw int64
	// The current Write's bytes, progress and error, for writeFn.
	p       []byte
	n       int
	err     error
	writeFn func(fd uintptr) bool
}

// Chunk is the most one raw write(2) call to a regular file is given.
const Chunk = 256 << 10

// loudFor is how long writes go through the runtime after a slow call.
const loudFor = 10 * time.Second

// slowCall is the longest a raw call may take, when it slept, before
// writes go through the runtime for loudFor (a variable for the tests).
var slowCall = 10 * time.Millisecond

// localFilesystems are the filesystems whose files are written raw.
var localFilesystems = [...]int64{
	unix.EXT4_SUPER_MAGIC, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC,
	unix.BTRFS_SUPER_MAGIC,
	unix.TMPFS_MAGIC,
	unix.F2FS_SUPER_MAGIC,
	unix.OVERLAYFS_SUPER_MAGIC,
}

// New returns a Writer for f, or nil when f is a regular file on none of
// the local filesystems, a directory, or cannot be looked at.
func New(f *os.File) *Writer {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	var serr error
	var fd uintptr
	fl := -1
	// Not f.Fd(): it would make a non-blocking file blocking.
	cerr := rc.Control(func(d uintptr) {
		fd = d
		if serr = unix.Fstat(int(fd), &st); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			serr = unix.Fstatfs(int(fd), &fs)
		}
		if serr == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
			fl, _ = unix.FcntlInt(fd, unix.F_GETFL, 0)
		}
	})
	if cerr != nil || serr != nil {
		return nil
	}
	w := &Writer{f: f, rc: rc}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if !local(int64(fs.Type)) {
			return nil
		}
		w.writeFn = w.writeRaw
	case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR:
		w.nowait = true
		w.writeFn = w.writeNowait
		if fl >= 0 && fl&unix.O_NONBLOCK == 0 {
			if p := reopenPipe(fd, &st); p != nil {
				if prc, err := p.SyscallConn(); err == nil {
					w.pipe, w.rc, w.writeFn = p, prc, w.writePipe
				} else {
					p.Close()
				}
			}
		}
	default:
		return nil
	}
	return w
}

// reopenPipe opens the pipe or FIFO fd (whose stat is st) anew through
// /proc/self/fd, for writing, non-blocking: a description of its own,
// whose flag no other writer of the pipe shares (setting O_NONBLOCK on fd
// itself would change it for every process that inherited it). os.OpenFile
// puts it in the runtime's poller. nil when that cannot be done (no /proc,
// a FIFO whose reader is gone) or the file opened is another.
func reopenPipe(fd uintptr, st *unix.Stat_t) *os.File {
	p, err := os.OpenFile("/proc/self/fd/"+strconv.FormatUint(uint64(fd), 10), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	var pst unix.Stat_t
	var serr error
	rc, err := p.SyscallConn()
	if err == nil {
		err = rc.Control(func(d uintptr) { serr = unix.Fstat(int(d), &pst) })
	}
	if err != nil || serr != nil || pst.Dev != st.Dev || pst.Ino != st.Ino || pst.Mode&unix.S_IFMT != unix.S_IFIFO {
		p.Close()
		return nil
	}
	return p
}

// Close closes what New opened for the Writer (the pipe opened anew), not
// the file it was given. A Write waiting for room returns.
func (w *Writer) Close() error {
	if w.pipe == nil {
		return nil
	}
	return w.pipe.Close()
}

func local(fsType int64) bool {
	for _, m := range localFilesystems {
		if fsType == m {
			return true
		}
	}
	return false
}

// Write writes p whole or says why not, as os.File.Write does.
func (w *Writer) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if w.noRaw || !w.nowait && time.Now().Before(w.loudUntil) {
		return w.f.Write(p)
	}
	w.p, w.n, w.err = p, 0, nil
	err := w.rc.Write(w.writeFn)
	n, werr := w.n, w.err
	w.p, w.n, w.err = nil, 0, nil
	w.raw += int64(n)
	if err != nil {
		// The descriptor could not be held: the file was closed.
		return 0, &os.PathError{Op: "write", Path: w.f.Name(), Err: os.ErrClosed}
	}
	if werr != nil || n == len(p) {
		return n, werr
	}
	// A slow call, or one that could not go on without waiting or
	// failed: the rest through the runtime, which waits as it should
	// and says what is wrong as it would have (for stdout's broken pipe,
	// by dying of SIGPIPE).
	m, err := w.f.Write(p[n:])
	return n + m, err
}

// writePipe is the RawConn.Write callback for a pipe opened anew: it
// writes w.p from w.n with write(2) on the non-blocking description, and
// when the pipe is full returns false, so that the runtime's poller waits
// for room and calls it again. It stops at an error (the runtime's write
// to the original file then reports it, as it always did).
func (w *Writer) writePipe(fd uintptr) bool {
	for w.n < len(w.p) {
		rest := w.p[w.n:]
		r, _, errno := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return false
		case errno != 0 || r == 0:
			return true
		}
		w.n += int(r)
	}
	return true
}

// writeNowait is the RawConn.Write callback for a pipe, a socket or a
// device: it writes w.p from w.n with pwritev2(RWF_NOWAIT), which never
// waits for room, and stops at the first call that wrote nothing. The
// bytes are not cut in chunks (a datagram socket sends a write whole).
func (w *Writer) writeNowait(fd uintptr) bool {
	for w.n < len(w.p) {
		rest := w.p[w.n:]
		iov := unix.Iovec{Base: &rest[0]}
		iov.SetLen(len(rest))
		// Offset -1, in both halves: the file's own position (a
		// 64-bit kernel ignores the high half).
		r, _, errno := unix.RawSyscall6(unix.SYS_PWRITEV2, fd, uintptr(unsafe.Pointer(&iov)), 1,
			^uintptr(0), ^uintptr(0), unix.RWF_NOWAIT)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EOPNOTSUPP || errno == unix.ENOSYS:
			w.noRaw = true // a file the kernel cannot promise not to wait on: a terminal
			return true
		case errno != 0 || r == 0:
			return true // EAGAIN (no room), or an error the runtime reports
		}
		w.n += int(r)
	}
	return true
}

// writeRaw is the RawConn.Write callback: it writes w.p from w.n in calls
// of at most Chunk bytes, and stops early after a call that slept.
func (w *Writer) writeRaw(fd uintptr) bool {
	// The thread's switch counts are compared across each call: the
	// goroutine must stay on it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for w.n < len(w.p) {
		chunk := w.p[w.n:]
		if len(chunk) > Chunk {
			chunk = chunk[:Chunk]
		}
		start, slept := time.Now(), threadSleeps()
		r, _, errno := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			w.err = &os.PathError{Op: "write", Path: w.f.Name(), Err: errno}
			return true
		}
		if r == 0 {
			w.err = &os.PathError{Op: "write", Path: w.f.Name(), Err: errors.New("wrote nothing")}
			return true
		}
		w.n += int(r)
		if now := time.Now(); now.Sub(start) > slowCall && threadSleeps() != slept {
			w.loudUntil = now.Add(loudFor)
			return true
		}
	}
	return true
}

// threadSleeps returns how many times the calling thread has slept in the
// kernel (its voluntary context switches, getrusage RUSAGE_THREAD); a
// preemption is an involuntary switch and does not count. A variable for
// the tests. The caller is locked to its thread.
var threadSleeps = func() int64 {
	var ru unix.Rusage
	unix.RawSyscall(unix.SYS_GETRUSAGE, unix.RUSAGE_THREAD, uintptr(unsafe.Pointer(&ru)), 0)
	return ru.Nvcsw
}
