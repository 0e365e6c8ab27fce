package logfeed

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// quietWriter writes the feed to a regular file on a local filesystem
// without telling the Go runtime of the system call: a write through the
// runtime wakes its sysmon thread when it sleeps, and an awake sysmon
// ticks every 20 µs for as long as the daemon works (measured under an
// exec storm on a host where a wake-up costs tens of µs: two thirds of
// sysmon's wake-ups, 1.5-2.5 µs of CPU per exec, came from the feed's
// writes once nothing else woke it).
//
// The cost: the thread keeps its P for the call, and a stop-the-world
// waits for it. A write to the page cache of a local disk returns in
// microseconds, but one the kernel throttles for dirty pages can sleep
// (up to 200 ms a pause), so each call writes at most quietChunk bytes,
// and after one call took longer than quietSlow the next quietPause of
// writes go through the runtime (os.File.Write). Files on network or FUSE
// filesystems, whose writes can wait on a server, and anything that is not
// a regular file, are never written this way (newQuietWriter says nil).
type quietWriter struct {
	f  *os.File
	rc syscall.RawConn
	// loudUntil: writes go through the runtime until then.
	loudUntil time.Time
	// The current Write's bytes, progress and error, for writeFn.
	p       []byte
	n       int
	err     error
	writeFn func(fd uintptr) bool
}

const (
	quietChunk = 256 << 10
	quietPause = 10 * time.Second
)

// quietSlow is the longest call a quiet write may take before writes go
// through the runtime for quietPause (a variable for the tests).
var quietSlow = 10 * time.Millisecond

// quietFilesystems are the local filesystems whose files are written
// quietly.
var quietFilesystems = [...]int64{
	unix.EXT4_SUPER_MAGIC, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC,
	unix.BTRFS_SUPER_MAGIC,
	unix.TMPFS_MAGIC,
	unix.F2FS_SUPER_MAGIC,
	unix.OVERLAYFS_SUPER_MAGIC,
}

// newQuietWriter returns a quietWriter for f, or nil when f is not a
// regular file on one of quietFilesystems.
func newQuietWriter(f *os.File) *quietWriter {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	var fs unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &fs) != nil {
		return nil
	}
	local := false
	for _, m := range quietFilesystems {
		local = local || int64(fs.Type) == m
	}
	if !local {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	q := &quietWriter{f: f, rc: rc}
	q.writeFn = q.writeRaw
	return q
}

// Write writes p whole or says why not. The file's descriptor is held
// (RawConn.Write) for the call, so a Close meanwhile cannot let its number
// be reused under the write.
func (q *quietWriter) Write(p []byte) (int, error) {
	if time.Now().Before(q.loudUntil) {
		return q.f.Write(p)
	}
	q.p, q.n, q.err = p, 0, nil
	err := q.rc.Write(q.writeFn)
	n, werr := q.n, q.err
	q.p, q.n, q.err = nil, 0, nil
	if err != nil {
		// The descriptor could not be held: the file was closed.
		return 0, &os.PathError{Op: "write", Path: q.f.Name(), Err: os.ErrClosed}
	}
	err = werr
	if err != nil || n == len(p) {
		return n, err
	}
	// Slow: the rest through the runtime.
	m, err := q.f.Write(p[n:])
	return n + m, err
}

// writeRaw is the RawConn.Write callback: it writes q.p from q.n in calls
// of at most quietChunk bytes, and stops early after a slow call.
func (q *quietWriter) writeRaw(fd uintptr) bool {
	for q.n < len(q.p) {
		chunk := q.p[q.n:]
		if len(chunk) > quietChunk {
			chunk = chunk[:quietChunk]
		}
		start := time.Now()
		r, _, errno := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			q.err = &os.PathError{Op: "write", Path: q.f.Name(), Err: errno}
			return true
		}
		if r == 0 {
			q.err = &os.PathError{Op: "write", Path: q.f.Name(), Err: errors.New("wrote nothing")}
			return true
		}
		q.n += int(r)
		if now := time.Now(); now.Sub(start) > quietSlow {
			q.loudUntil = now.Add(quietPause)
			return true
		}
	}
	return true
}
