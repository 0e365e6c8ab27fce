package procctx

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/procsupervisor/supervisor/internal/container"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"golang.org/x/sys/unix"
)

// DefaultArgvMax is the argv bound of a Reader given none: the eBPF
// source's default.
const DefaultArgvMax = 32 << 10

// Reader reads exec contexts from a proc root. It reuses its buffers: one
// goroutine at a time.
type Reader struct {
	root    string
	argvMax int
	cg2     string // the cgroup2 mount point, "" when none was found
	buf     []byte
	link    []byte
	whole   []byte // readAll's, kept between calls
}

// New returns a Reader of root (normally "/proc") that keeps at most
// argvMax bytes of an argv (DefaultArgvMax when argvMax <= 0). The cgroup2
// mount, for cgroup ids, is found in root/self/mountinfo.
func New(root string, argvMax int) *Reader {
	if argvMax <= 0 {
		argvMax = DefaultArgvMax
	}
	r := &Reader{root: root, argvMax: argvMax, buf: make([]byte, 4096), link: make([]byte, unix.PathMax), whole: make([]byte, 0, 4096)}
	if mi, err := os.ReadFile(root + "/self/mountinfo"); err == nil {
		r.cg2, _ = procfs.Cgroup2Mount(mi)
	}
	return r
}

// Fill sets ev's Exe, Argv, Exec and Ctx from /proc/PID for the process
// ev names. ev.Token must have a start time in ticks, which the process
// must have, and its pidfs inode when the token has one: a token of
// another precision (the ps fallback's, in seconds) cannot tell the
// instance it names from one that took its pid within the same second,
// and gets nothing. It returns ErrGone when the process is gone, a
// zombie, or another instance (or one the token cannot prove), ErrInExec
// when its tracer holds it inside an exec, ErrChanged when ev is a
// poller's and the process no longer has the name the poller saw, and
// leaves ev untouched on any error.
func (r *Reader) Fill(ev *events.Event) error {
	if ev.Token.Prec != token.Ticks {
		return ErrGone
	}
	dir, err := unix.Open(r.root+"/"+strconv.Itoa(int(ev.Pid)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return gone(err, "open")
	}
	defer unix.Close(dir)
	var st procfs.Stat
	if err := r.stat(dir, &st); err != nil {
		return err
	}
	if st.Zombie() || ev.Token.Start != st.StartTime {
		return ErrGone
	}
	if ev.Token.Ino != 0 && !sameInode(ev.Pid, ev.Token.Ino) {
		// Another instance started within the same tick: the pidfs
		// inode tells them apart. (dir was opened first: if it named an
		// older instance, that one is dead and the last read fails.)
		return ErrGone
	}
	var c events.Context
	status, err := r.readAll(dir, "status")
	if err != nil {
		return err
	}
	if err := parseStatus(status, &c); err != nil {
		return err
	}
	// /proc gives a process's private entries (fd, environ; not the
	// directory itself) to its effective ids only while it is dumpable
	// (task_dump_owner), to root otherwise.
	var own unix.Stat_t
	if err := unix.Fstatat(dir, "fd", &own, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return gone(err, "stat fd")
	}
	c.Undumpable = own.Uid != c.EUID || own.Gid != c.EGID
	c.SID, c.PGID = st.Session, st.PGrp
	if st.TTY != 0 {
		c.TTY = true
		c.TTYMajor, c.TTYMinor = ttyDev(st.TTY)
		c.StdTTY = r.onTTY(dir, "fd/0", c) && r.onTTY(dir, "fd/2", c)
	}
	if n, err := r.readAt(dir, "loginuid", r.buf); err == nil {
		c.LoginUID, c.Audit = parseID(r.buf[:n])
		if n, err := r.readAt(dir, "sessionid", r.buf); c.Audit && err == nil {
			c.AuditSession, c.Audit = parseID(r.buf[:n])
		}
	}
	if s, ok := r.readlink(dir, "ns/pid"); ok {
		if ino, ok := parseNSLink(s, "pid"); ok {
			c.PidNS = uint32(ino)
		}
	}
	if s, ok := r.readlink(dir, "ns/mnt"); ok {
		if ino, ok := parseNSLink(s, "mnt"); ok {
			c.MntNS = uint32(ino)
		}
	}
	var x events.ExecInfo
	if b, err := r.readAll(dir, "cgroup"); err == nil {
		if p, ok := procfs.Cgroup2Path(b); ok {
			x.Cgroup = p
			var s unix.Stat_t
			switch {
			case len(p) >= cgroupPathMax:
				// The kernel cut the path at PATH_MAX: it names no
				// cgroup, or another, and its last part (where a
				// container's id is) is gone.
				x.CgroupTruncated = true
				c.Absent |= events.CtxCgroup
			case r.cg2 == "":
			case unix.Stat(r.cg2+p, &s) == nil:
				c.CgroupID = s.Ino
			default:
				c.Absent |= events.CtxCgroup
			}
			if id, rt, ok := container.ID(p); ok && !x.CgroupTruncated {
				x.ContainerID, x.ContainerRuntime = id, string(rt)
			}
		}
	}
	root := r.openRoot(dir)
	cwd := r.pathLink(dir, "cwd", root)
	if cwd.long {
		cwd = r.cwdTail(dir, root)
	}
	exe := r.pathLink(dir, "exe", root)
	if exe.long {
		exe = r.progInCwd(dir, cwd)
	}
	if root.fd >= 0 {
		unix.Close(root.fd)
	}
	// A link that could not be read at all (neither a path nor too long
	// for one) is named absent, not left to read as no path.
	if !exe.ok {
		c.Absent |= events.CtxExe
	}
	if !cwd.ok {
		c.Absent |= events.CtxCwd
	}
	x.ExeTruncated, x.ExeDeleted = exe.ok && !exe.whole, exe.path != "" && exe.deleted
	x.Cwd, x.CwdTruncated, x.CwdDeleted = cwd.path, cwd.ok && !cwd.whole, cwd.path != "" && cwd.deleted
	argv, err := r.cmdline(dir, &x)
	if err != nil {
		return err
	}
	// The last read: when it succeeds with the same start time, every read
	// before it was of this instance, alive.
	var again procfs.Stat
	if err := r.stat(dir, &again); err != nil {
		return err
	}
	if again.Zombie() || again.StartTime != st.StartTime {
		return ErrGone
	}
	if again.State == 't' && r.inExec(dir) {
		return ErrInExec
	}
	if ev.Inferred && ev.Comm != ([16]byte{}) && (st.Comm != ev.Comm || again.Comm != ev.Comm) {
		return ErrChanged
	}
	if exe.ok && x.ArgsSize == 0 {
		// A process with a program (a kernel thread has none) and no
		// argument area: it is inside an exec, which has mapped the new
		// program (its exe, its name) and not yet set up its arguments,
		// and whose message the kernel sends only at the end. (Even an
		// exec with no arguments gets one empty string.)
		return ErrInExec
	}
	c.Valid = true
	ev.Ctx, ev.Exec, ev.Exe, ev.Argv = c, x, exe.path, argv
	return nil
}

// inExec reports whether the process, stopped by its tracer, is inside
// an execve or execveat: its syscall file names the call it is in.
func (r *Reader) inExec(dir int) bool {
	n, err := r.readAt(dir, "syscall", r.buf)
	if err != nil {
		return true // cannot tell: as if it were
	}
	nr, _, _ := bytes.Cut(r.buf[:n], []byte{' '})
	v, err := strconv.Atoi(string(nr)) // the conversion does not allocate
	return err != nil || v == unix.SYS_EXECVE || v == unix.SYS_EXECVEAT
}

// stat reads and parses the stat file under dir.
func (r *Reader) stat(dir int, st *procfs.Stat) error {
	n, err := r.readAt(dir, "stat", r.buf)
	if err != nil {
		return err
	}
	if err := procfs.ParseStat(r.buf[:n], st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	return nil
}

// readAt reads the start of file name under dir into buf.
func (r *Reader) readAt(dir int, name string, buf []byte) (int, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, gone(err, name)
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return 0, gone(err, name)
	}
	return n, nil
}

// cgroupPathMax is the length at which /proc/PID/cgroup cuts a path: the
// kernel writes it through a PATH_MAX buffer, less its NUL.
const cgroupPathMax = unix.PathMax - 1

// readAll reads the whole of file name under dir into r.whole: a status
// file outgrows any fixed buffer with the groups line (up to 65536 ids),
// and one cut short miscounts the groups and loses the lines after them; a
// cgroup file holds paths of up to PATH_MAX, and one cut short names
// another cgroup.
// The kernel generates such a file at once, so the reads are of one text.
func (r *Reader) readAll(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, gone(err, name)
	}
	defer unix.Close(fd)
	b := r.whole[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err != nil {
			return nil, gone(err, name)
		}
		if n == 0 {
			r.whole = b
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readlink reads the link name under dir; false when it cannot be read
// (a kernel thread's exe, a process another user's namespace hides).
func (r *Reader) readlink(dir int, name string) (string, bool) {
	s, err := r.readlinkErr(dir, name)
	return s, err == nil
}

// readlinkErr is readlink with the reason it failed: ENAMETOOLONG for a
// target longer than PATH_MAX, which the kernel does not write at all.
func (r *Reader) readlinkErr(dir int, name string) (string, error) {
	n, err := unix.Readlinkat(dir, name, r.link)
	switch {
	case err != nil:
		return "", err
	case n >= len(r.link):
		return "", unix.ENAMETOOLONG
	case n <= 0:
		return "", unix.ENOENT
	}
	return string(r.link[:n]), nil
}

// deletedSuffix is what the kernel appends to the path of an unlinked
// file or directory in a /proc link.
const deletedSuffix = " (deleted)"

// resolveCached is openat2's RESOLVE_CACHED (Linux 5.12), which
// golang.org/x/sys does not name: the lookup fails with EAGAIN rather
// than leave the dentry cache.
const resolveCached = 0x20

// rootView is the process's root directory, against which pathLink
// checks the paths of its exe and cwd links. The kernel writes a link's
// target from the reader's root: a file inside the process's chroot reads
// with the chroot's path in front; one outside it, or on a mount detached
// since (umount -l, open_tree), reads as an absolute path the process
// does not have (a program copied to a tmpfs as usr/bin/sudo, the tmpfs
// lazily unmounted, reads as /usr/bin/sudo). A container's process, in its
// own mount namespace under pivot_root, reads as it sees itself.
type rootView struct {
	fd   int    // the process's root, O_PATH; -1 when it cannot be opened
	path string // its path from the reader's root
}

// openRoot opens the process's root; the caller closes v.fd when it is
// not -1.
func (r *Reader) openRoot(dir int) rootView {
	p, ok := r.readlink(dir, "root")
	if !ok {
		return rootView{fd: -1}
	}
	fd, err := unix.Openat(dir, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return rootView{fd: -1}
	}
	return rootView{fd: fd, path: p}
}

// linkPath is the path pathLink read of an exe or cwd link.
type linkPath struct {
	path string
	// whole: path is the whole path from the process's root; otherwise it
	// is cut (its last names, without the leading slash; "" when none).
	whole   bool
	deleted bool
	// ok: the link was read (or was too long to be: long). A process
	// whose link cannot be read (a kernel thread's exe) has no path.
	ok bool
	// long: the kernel refused the link as longer than PATH_MAX; path is
	// empty, and cwdTail or progInCwd give what they can of it.
	long bool
	// dev and ino are the link's file, when the path was read.
	dev, ino uint64
}

// pathLink reads the exe or cwd link name under dir as the path the file
// has in the process's view (from its root, as the eBPF source reads it),
// and reports it cut (not whole) when that path cannot be proved, and
// deleted when its name was unlinked:
//   - the kernel appends " (deleted)" to the target of a file unlinked
//     since: the path is given without it, marked deleted, as the eBPF
//     source marks it, when the link's file itself tells, unlinked, that it
//     has no links left (a file whose real name ends in " (deleted)" keeps
//     it, unmarked; one unlinked under one of its names while another
//     remains reads as named so, and is cut by the check below). A memfd
//     reads as "/memfd:NAME (deleted)" with no links, but never had a
//     name to lose: on an internal mount, its path is never proved, and
//     a path starting "/memfd:" that is not is not marked deleted;
//   - a path outside the process's root (a descriptor from beyond its
//     chroot) is cut: the names are given without the leading slash;
//   - the path must lead, from the process's root, to the link's own file
//     (for an unlinked one, to a directory on its device), looked up with
//     RESOLVE_CACHED: only through dentries the kernel has in memory, so
//     a hung mount cannot block the reader (a program just exec'd and a
//     working directory in use are there). When it does not, the names are
//     not a path the process has (a detached mount, a memfd's "/memfd:x",
//     a rename since), and are given cut, as eBPF gives them;
//   - a path longer than PATH_MAX, which the kernel does not write (the
//     readlink fails with ENAMETOOLONG), is reported long, for the caller
//     to walk (cwdTail, progInCwd).
func (r *Reader) pathLink(dir int, name string, v rootView) linkPath {
	p, err := r.readlinkErr(dir, name)
	if err == unix.ENAMETOOLONG {
		return linkPath{ok: true, long: true}
	}
	if err != nil {
		return linkPath{}
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, 0) != nil {
		return linkPath{}
	}
	l := linkPath{ok: true, dev: st.Dev, ino: st.Ino}
	trimmed, deleted := strings.CutSuffix(p, deletedSuffix)
	if deleted = deleted && st.Nlink == 0; deleted {
		p = trimmed
	}
	// What is not proved below: a memfd is no deleted file.
	l.deleted = deleted && !strings.HasPrefix(p, "/memfd:")
	l.path = strings.TrimLeft(p, "/")
	switch {
	case v.fd < 0:
		return l
	case v.path == "/":
	case p == v.path:
		p = "/"
	case strings.HasPrefix(p, v.path+"/"):
		p = p[len(v.path):]
	default:
		return l
	}
	look := p
	if deleted {
		look = path.Dir(p)
	}
	fd, err := unix.Openat2(v.fd, look, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | resolveCached,
	})
	l.path = strings.TrimLeft(p, "/")
	if err != nil {
		return l
	}
	var got unix.Stat_t
	err = unix.Fstat(fd, &got)
	unix.Close(fd)
	if err != nil || got.Dev != st.Dev || !deleted && got.Ino != st.Ino || deleted && got.Mode&unix.S_IFMT != unix.S_IFDIR {
		return l
	}
	l.path, l.whole, l.deleted = p, true, deleted
	return l
}

// onTTY reports whether fd link name under dir is the process's
// controlling terminal.
func (r *Reader) onTTY(dir int, name string, c events.Context) bool {
	var s unix.Stat_t
	if unix.Fstatat(dir, name, &s, 0) != nil || s.Mode&unix.S_IFMT != unix.S_IFCHR {
		return false
	}
	return unix.Major(s.Rdev) == c.TTYMajor && unix.Minor(s.Rdev) == c.TTYMinor
}

// cmdline reads the argument vector: its first argvMax bytes as argv, and
// its whole size and count into x (ArgsTruncated when cut). A process
// without one (a kernel thread, a zombie) has a nil argv.
func (r *Reader) cmdline(dir int, x *events.ExecInfo) ([]string, error) {
	fd, err := unix.Openat(dir, "cmdline", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, gone(err, "cmdline")
	}
	defer unix.Close(fd)
	var kept []byte
	total, nuls := 0, 0
	last := byte(0)
	for {
		n, err := unix.Read(fd, r.buf)
		if err != nil {
			return nil, gone(err, "cmdline")
		}
		if n == 0 {
			break
		}
		chunk := r.buf[:n]
		if room := r.argvMax - len(kept); room > 0 {
			kept = append(kept, chunk[:min(room, n)]...)
		}
		for _, b := range chunk {
			if b == 0 {
				nuls++
			}
		}
		total += n
		last = chunk[n-1]
	}
	if total >= len(r.buf) {
		// More than one read: an exit between two of them (exit_mm, which
		// comes before the zombie state the last stat read checks) ends
		// the vector early, as an end of file would. The memory is given
		// back once and for all, so reading a byte of it again tells:
		// still there, every read before was whole.
		if n, err := unix.Pread(fd, r.buf[:1], 0); err != nil || n != 1 {
			return nil, ErrGone
		}
	}
	x.ArgsSize, x.ArgsCount = total, nuls
	if total > 0 && last != 0 {
		x.ArgsCount++ // a process that rewrote its argv area without the NUL
	}
	x.ArgsTruncated = total > len(kept)
	return events.SplitArgs(kept), nil
}

// sameInode reports whether pid now names the process whose pidfs inode
// is ino.
func sameInode(pid int32, ino uint64) bool {
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var s unix.Stat_t
	return unix.Fstat(fd, &s) == nil && s.Ino == ino
}

// gone maps a read's error: a process that exited (ENOENT, ESRCH) is
// ErrGone.
func gone(err error, what string) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	return fmt.Errorf("reading %s: %w", what, err)
}
