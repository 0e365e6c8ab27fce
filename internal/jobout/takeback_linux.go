package jobout

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// takeBack makes the file pfd (a descriptor of it, O_PATH will do) root's
// alone: owner and group root, no ACL, mode 0. Whoever knows a name of it
// (a hard link its job made elsewhere: protected_hardlinks lets a user
// link a file it may read and write) can then neither open it nor link it
// again. Descriptors already open keep the access they were opened with.
// With write it returns a descriptor of the file open for writing, made
// while the mode still let root open it (the packaged unit has no
// CAP_DAC_OVERRIDE), else -1; the access is taken back even when that
// open fails (a lease held by the user makes it EWOULDBLOCK).
//
// The owner changes first (CAP_CHOWN): where the filesystem keeps no ACLs
// the file is its user's (GiveTo), and only its owner, or CAP_FOWNER,
// which the packaged unit does not have either, may change its mode. The
// mode is changed through /proc/self/fd, as fchmod takes no O_PATH
// descriptor.
func takeBack(pfd int, write bool) (int, error) {
	if err := unix.Fchownat(pfd, "", 0, 0, unix.AT_EMPTY_PATH); err != nil {
		return -1, fmt.Errorf("chown to root: %w", err)
	}
	proc := "/proc/self/fd/" + strconv.Itoa(pfd)
	// Its user's entry goes with the whole ACL; mode 0 below would mask
	// it too (a chmod sets the mask), but a later chmod by root must not
	// bring it back.
	if err := unix.Removexattr(proc, "system.posix_acl_access"); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.EOPNOTSUPP) {
		return -1, fmt.Errorf("removing the ACL: %w", err)
	}
	if !write {
		if err := unix.Chmod(proc, 0); err != nil {
			return -1, fmt.Errorf("chmod 0: %w", err)
		}
		return -1, nil
	}
	// Owner write only while root opens it: the user is neither owner
	// nor group (root's) now, and has no ACL entry.
	if err := unix.Chmod(proc, 0o200); err != nil {
		return -1, fmt.Errorf("chmod 0200: %w", err)
	}
	fd, oerr := unix.Open(proc, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err := unix.Chmod(proc, 0); err != nil {
		if oerr == nil {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("chmod 0: %w", err)
	}
	if oerr != nil {
		return -1, fmt.Errorf("open for writing: %w", oerr)
	}
	return fd, nil
}

// Discard gives up the output file at path, when its claim is dropped:
// the file is taken back from its user (root's, no ACL, mode 0), emptied
// and its name removed. A hard link its job made elsewhere is then a name
// of an empty file no user may open; before, it stayed a file its user
// could write, root's (no disk quota charged it) and outside the
// directory (no bound reached it). A process that holds the file open
// keeps writing to it (see the package comment). Nothing at path is no
// error; anything at path but a regular file has its name removed only.
func Discard(path string) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(pfd)
	var errs []error
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		errs = append(errs, fmt.Errorf("stat %s: %w", path, err))
	} else if st.Mode&unix.S_IFMT == unix.S_IFREG {
		// Emptied before the name goes: a process still holding it
		// open would keep its bytes on disk after.
		fd, err := takeBack(pfd, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("taking back %s: %w", path, err))
		}
		if fd >= 0 {
			if err := unix.Ftruncate(fd, 0); err != nil {
				errs = append(errs, fmt.Errorf("truncate %s: %w", path, err))
			}
			unix.Close(fd)
		}
	}
	if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("remove %s: %w", path, err))
	}
	return errors.Join(errs...)
}
