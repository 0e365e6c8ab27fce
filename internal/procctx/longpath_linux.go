package procctx

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Paths longer than PATH_MAX. The kernel does not write a /proc link whose
// target is longer than PATH_MAX (4,096 bytes with its NUL): the readlink
// fails with ENAMETOOLONG. The eBPF source walks such a path in the kernel
// and gives its last names, marked cut; here, the working directory's
// names are found by a walk up from it, and the executable's when it is in
// the working directory (a program run as ./prog). Otherwise the path is
// given as none, still marked cut: the process has one, it is not known.

// The bounds of the walk: the eBPF source's, PATH_BYTES and PATH_DEPTH (a
// path gives as many of its last names as fit whole in tailBytes, with a
// separator each, after at most tailSteps steps: names and mount
// crossings); and what a walk reads: at most walkRead bytes of directory
// entries and walkLookups names looked up, past which it gives the names
// found so far.
const (
	tailBytes   = unix.PathMax
	tailSteps   = 128
	walkRead    = 64 << 10
	walkLookups = 2 * tailSteps
)

// cwdTail gives the working directory of the process whose /proc
// directory is dir, when its path is too long for the kernel to write:
// the names from it up, each found in its parent's entries and proved by a
// lookup (nameIn), crossing from a mount's root to its mountpoint, up to
// the process's root (then the path is whole, shorter from there than it
// is from the reader's root) or to a bound (then it is cut, its last
// names). A directory removed while in use has no name to find: it is
// given no path, marked cut.
func (r *Reader) cwdTail(dir int, v rootView) linkPath {
	l := linkPath{ok: true}
	fd, err := unix.Openat(dir, "cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return l
	}
	defer unix.Close(fd)
	id, nlink, _, ok := identify(fd, "", unix.AT_EMPTY_PATH)
	if !ok || nlink == 0 {
		return l
	}
	l.dev, l.ino = id.dev, id.ino
	l.path, l.whole = r.walkUp(fd, id, v)
	return l
}

// progInCwd gives the executable of the process whose /proc directory is
// dir, when its path is too long for the kernel to write, if it is in the
// working directory cwd (cwdTail's or pathLink's, the same directory by its
// device and inode): cwd's path and the name under which the directory
// lists it, proved by a lookup, cut to its last names past tailBytes. A
// file of several links has no one name, and is given none; so is a
// program elsewhere. Either way the result is marked cut.
func (r *Reader) progInCwd(dir int, cwd linkPath) linkPath {
	l := linkPath{ok: true}
	if !cwd.ok || cwd.deleted || cwd.path == "" {
		return l
	}
	exe, nlink, mode, ok := identify(dir, "exe", 0)
	if !ok || nlink != 1 || mode&unix.S_IFMT != unix.S_IFREG {
		return l
	}
	fd, err := openDir(dir, "cwd")
	if err != nil {
		return l
	}
	defer unix.Close(fd)
	if id, _, _, ok := identify(fd, "", unix.AT_EMPTY_PATH); !ok || id.dev != cwd.dev || id.ino != cwd.ino || id.mnt != exe.mnt {
		return l
	}
	w := walk{read: walkRead, lookups: walkLookups}
	name, ok := r.nameIn(fd, exe, false, &w)
	if !ok {
		return l
	}
	p := make([]byte, 0, len(cwd.path)+1+len(name)+1)
	if !cwd.whole {
		p = append(p, '/') // lastNames's form: a leading slash
	}
	p = append(p, cwd.path...)
	if p[len(p)-1] != '/' {
		p = append(p, '/')
	}
	p = append(p, name...)
	l.dev, l.ino = exe.dev, exe.ino
	if cwd.whole && len(p) <= tailBytes {
		l.path, l.whole = string(p), true
		return l
	}
	l.path = string(lastNames(p, tailBytes))
	return l
}

// lastNames gives the last names of p (a path with its leading slash)
// that fit whole in n bytes with a separator each, without the leading
// separator.
func lastNames(p []byte, n int) []byte {
	for i := max(0, len(p)-n); i < len(p); i++ {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return nil
}

// fileID is a file on a mount: what the walk up compares.
type fileID struct{ dev, ino, mnt uint64 }

// identify stats the file at path under fd (with AT_EMPTY_PATH, fd's
// own), from the attributes the kernel has (AT_STATX_DONT_SYNC: a network
// filesystem is not asked); false when the kernel gives no mount id
// (before Linux 5.8).
func identify(fd int, path string, flags int) (id fileID, nlink uint32, mode uint16, ok bool) {
	var sx unix.Statx_t
	err := unix.Statx(fd, path, flags|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_NLINK|unix.STATX_MNT_ID, &sx)
	if err != nil || sx.Mask&(unix.STATX_TYPE|unix.STATX_INO|unix.STATX_MNT_ID) != unix.STATX_TYPE|unix.STATX_INO|unix.STATX_MNT_ID {
		return fileID{}, 0, 0, false
	}
	return fileID{unix.Mkdev(sx.Dev_major, sx.Dev_minor), sx.Ino, sx.Mnt_id}, sx.Nlink, sx.Mode, true
}

// openDir opens the directory name under at to read its entries, without
// touching its access time (O_NOATIME, which the reader has on a
// directory it does not own only as root).
func openDir(at int, name string) (int, error) {
	fd, err := unix.Openat(at, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOATIME, 0)
	if err == unix.EPERM {
		fd, err = unix.Openat(at, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

// walkUp gives the path of directory d (a descriptor the caller keeps),
// the file id: its names from the leaf up, written from the end of r.link
// as the kernel writes a path, until the process's root (v), when it is
// met, and the path is whole, or until the top of the tree, a name that
// cannot be found, or a bound, when the path is its last names, cut
// ("" when none).
//
// Each step opens d's parent by "..": the kernel steps from a mount's root
// to its mountpoint's directory in the parent mount (a mount crossing,
// a step as in eBPF); at the top of the reader's root or of a mount
// namespace's tree, ".." is the directory itself. The lookup goes through
// the dentry cache only (RESOLVE_CACHED); the parent's entries are read
// (nameIn), the one thing here that asks the filesystem.
func (r *Reader) walkUp(d int, id fileID, v rootView) (string, bool) {
	var root fileID
	haveRoot := false
	if v.fd >= 0 {
		root, _, _, haveRoot = identify(v.fd, "", unix.AT_EMPTY_PATH)
	}
	b := r.link[:tailBytes]
	pos := len(b)
	w := walk{read: walkRead, lookups: walkLookups}
	cur := d
	defer func() {
		if cur != d {
			unix.Close(cur)
		}
	}()
	for steps := 0; ; {
		if haveRoot && id == root {
			if pos == len(b) {
				return "/", true
			}
			return string(b[pos:]), true
		}
		if steps >= tailSteps {
			break
		}
		up, err := unix.Openat2(cur, "..", &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOATIME,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | resolveCached,
		})
		if err == unix.EPERM {
			up, err = unix.Openat2(cur, "..", &unix.OpenHow{
				Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | resolveCached,
			})
		}
		if err != nil {
			break
		}
		upID, _, _, ok := identify(up, "", unix.AT_EMPTY_PATH)
		crossing := upID.mnt != id.mnt
		if crossing {
			steps++
		}
		var name []byte
		if ok && upID != id && steps < tailSteps {
			name, ok = r.nameIn(up, id, crossing, &w)
		} else {
			ok = false
		}
		if !ok || len(name)+1 > pos {
			unix.Close(up)
			break
		}
		pos -= len(name) + 1
		b[pos] = '/'
		copy(b[pos+1:], name)
		steps++
		if cur != d {
			unix.Close(cur)
		}
		cur, id = up, upID
	}
	if pos == len(b) {
		return "", false
	}
	return string(b[pos+1:]), false
}

// walk is what a walk may still read: bytes of directory entries, and
// lookups.
type walk struct{ read, lookups int }

// nameIn finds in directory up (open for reading) the name of file id,
// which it holds: an entry with id's inode whose lookup leads to id (the
// same inode on the same mount: a name that a mount covers leads to the
// mount's root); or, at a mount crossing (id a mount's root, up its
// mountpoint's directory, whose entry has the inode of the directory under
// the mount), a directory entry whose lookup, through the dentry cache
// only (RESOLVE_CACHED), leads to id across the mount. The name is in
// r.buf, until its next use.
func (r *Reader) nameIn(up int, id fileID, crossing bool, w *walk) ([]byte, bool) {
	const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | resolveCached
	for w.read > 0 {
		n, err := unix.Getdents(up, r.buf)
		if err != nil || n <= 0 {
			return nil, false
		}
		w.read -= n
		for rest := r.buf[:n]; len(rest) > 0; {
			ino, typ, name, next, ok := nextDirent(rest)
			if !ok {
				return nil, false
			}
			rest = next
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if crossing && typ != unix.DT_DIR && typ != unix.DT_UNKNOWN || !crossing && ino != id.ino {
				continue
			}
			if w.lookups <= 0 {
				return nil, false
			}
			w.lookups--
			var got fileID
			if crossing {
				fd, err := unix.Openat2(up, string(name), &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve})
				if err != nil {
					continue
				}
				got, _, _, ok = identify(fd, "", unix.AT_EMPTY_PATH)
				unix.Close(fd)
			} else {
				// The entry with id's inode is id's own dentry, which
				// id's descriptor (or a process's exe) keeps in the
				// cache: one statx looks it up. Covered by a mount, it
				// leads to the mount's root: another id.
				got, _, _, ok = identify(up, string(name), unix.AT_SYMLINK_NOFOLLOW)
			}
			if ok && got == id {
				return name, true
			}
		}
	}
	return nil, false
}

// direntName is the offset of d_name in a struct linux_dirent64, after
// d_ino (8 bytes), d_off (8), d_reclen (2) and d_type (1).
const direntName = 19

// nextDirent parses the first record of getdents64's b: its inode, type
// and name, and the records after it; false when b does not start with a
// whole record, or its name is empty, unterminated or holds a '/'.
func nextDirent(b []byte) (ino uint64, typ uint8, name, rest []byte, ok bool) {
	if len(b) < direntName {
		return 0, 0, nil, nil, false
	}
	reclen := int(binary.NativeEndian.Uint16(b[16:18]))
	if reclen <= direntName || reclen > len(b) {
		return 0, 0, nil, nil, false
	}
	name = b[direntName:reclen]
	end := bytes.IndexByte(name, 0)
	if end <= 0 || bytes.IndexByte(name[:end], '/') >= 0 {
		return 0, 0, nil, nil, false
	}
	return binary.NativeEndian.Uint64(b[:8]), b[18], name[:end], b[reclen:], true
}
