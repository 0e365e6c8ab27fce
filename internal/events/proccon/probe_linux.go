package proccon

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

// procInfo is what the source learns about a live process from /proc.
type procInfo struct {
	Stat    procfs.Stat
	Threads int32  // num_threads (stat field 20): tasks still hashed in the group
	Ino     uint64 // pidfs inode id; 0 when not bound or no pidfs
}

// prober reads what the source needs about a process. The kernel one reads
// /proc and binds pidfds; replay tests use a table.
type prober interface {
	// stat reads pid's stat line and thread count. A missing process
	// yields an error matching os.ErrNotExist.
	stat(pid int32, pi *procInfo) error
	// bind reads the stat line and the pidfs inode of the one instance
	// that held pid throughout the reads (a process reaped, and its pid
	// reissued, in between fails the read). Errors as for stat.
	bind(pid int32, pi *procInfo) error
}

// kernelProber reads the live /proc. It reuses its buffers: one instance per
// Source, used from the Read goroutine only.
type kernelProber struct {
	pidfs bool // the kernel has pidfs: fstat of a pidfd yields a unique inode
	path  []byte
	buf   [1024]byte
	st    unix.Stat_t
}

// pidfsMagic is PIDFS_MAGIC (Linux 6.9+).
const pidfsMagic = 0x50494446

func newKernelProber() (*kernelProber, error) {
	p := &kernelProber{path: make([]byte, 0, 32)}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return nil, fmt.Errorf("fstatfs pidfd: %w", err)
	}
	p.pidfs = sfs.Type == pidfsMagic
	return p, nil
}

func (p *kernelProber) stat(pid int32, pi *procInfo) error {
	pi.Ino = 0
	fd, err := p.openStat(pid)
	if err != nil {
		return err
	}
	defer closeFD(fd)
	return p.readStat(fd, pi)
}

// bind opens a pidfd on pid (a process already gone costs this one call,
// about 0.2 µs), reads the pidfs inode through it and the stat line from
// /proc, and confirms with a null signal through the pidfd that its
// process was not reaped meanwhile: the pid was not reissued between the
// pidfd and the read, so both describe one instance. (Opening the stat
// file first would make the confirmation needless, since an open
// /proc/PID/stat is tied to its instance, but a failed /proc lookup costs
// over 2 µs, ten times a failed pidfd_open.) All calls are raw: none
// blocks, and the hot path does not go through the scheduler.
func (p *kernelProber) bind(pid int32, pi *procInfo) error {
	pi.Ino = 0
	fd, _, errno := unix.RawSyscall(unix.SYS_PIDFD_OPEN, uintptr(pid), 0, 0)
	if errno != 0 {
		// ESRCH: gone. EINVAL: pid is now a thread of another process,
		// so not the process the event named.
		if errno == unix.ESRCH || errno == unix.EINVAL {
			return os.ErrNotExist
		}
		return errno
	}
	defer closeFD(fd)
	if p.pidfs {
		_, _, errno := unix.RawSyscall(unix.SYS_FSTAT, fd, uintptr(unsafe.Pointer(&p.st)), 0)
		if errno != 0 {
			return errno
		}
		pi.Ino = p.st.Ino
	}
	if err := p.stat(pid, pi); err != nil {
		return err
	}
	if p.pidfs {
		pi.Ino = p.st.Ino // stat cleared it
	}
	_, _, errno = unix.RawSyscall6(unix.SYS_PIDFD_SEND_SIGNAL, fd, 0, 0, 0, 0, 0)
	if errno == unix.ESRCH {
		return os.ErrNotExist
	}
	return nil
}

// openStat opens /proc/PID/stat without allocating.
func (p *kernelProber) openStat(pid int32) (uintptr, error) {
	p.path = append(p.path[:0], "/proc/"...)
	p.path = strconv.AppendInt(p.path, int64(pid), 10)
	p.path = append(p.path, "/stat\x00"...)
	fd, _, errno := unix.RawSyscall6(unix.SYS_OPENAT, atFDCWD,
		uintptr(unsafe.Pointer(&p.path[0])), uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return 0, mapErrno(errno)
	}
	return fd, nil
}

func closeFD(fd uintptr) { unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0) }

// readStat reads and parses the stat line behind fd without allocating.
func (p *kernelProber) readStat(fd uintptr, pi *procInfo) error {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p.buf[0])), uintptr(len(p.buf)))
	if errno != 0 {
		return mapErrno(errno)
	}
	b := p.buf[:n]
	if err := procfs.ParseStat(b, &pi.Stat); err != nil {
		return err
	}
	t, ok := numThreads(b)
	if !ok {
		return fmt.Errorf("stat: bad num_threads: %w", procfs.ErrMalformed)
	}
	pi.Threads = t
	return nil
}

func mapErrno(e unix.Errno) error {
	if e == unix.ENOENT || e == unix.ESRCH {
		return os.ErrNotExist
	}
	return e
}

var fdcwd = unix.AT_FDCWD

// atFDCWD is AT_FDCWD as a raw syscall argument.
var atFDCWD = uintptr(fdcwd)

// numThreads extracts field 20 (num_threads) of a stat line. procfs.Stat
// does not carry it.
func numThreads(b []byte) (int32, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	b = b[i+1:]
	// Fields after comm start at 3; skip 17 of them to reach field 20.
	for f := 3; ; f++ {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		end := bytes.IndexByte(b, ' ')
		if end < 0 {
			end = len(b)
		}
		if f == 20 {
			tok := bytes.TrimRight(b[:end], "\n")
			if len(tok) == 0 || len(tok) > 10 {
				return 0, false
			}
			var v int64
			for _, c := range tok {
				if c < '0' || c > '9' {
					return 0, false
				}
				v = v*10 + int64(c-'0')
			}
			if v > 1<<31-1 {
				return 0, false
			}
			return int32(v), true
		}
		if end == len(b) {
			return 0, false
		}
		b = b[end:]
	}
}
