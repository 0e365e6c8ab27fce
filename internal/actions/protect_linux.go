package actions

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// nsGetParent is NS_GET_PARENT (linux/nsfs.h, _IO(0xb7, 0x2)), which
// x/sys does not name: it opens the parent of the pid namespace a
// descriptor refers to.
const nsGetParent = 0xb702

// nestedIn reports whether process pid lives in a pid namespace nested
// (at any depth) in the one whose nsfs inode is ino, which sits depth
// levels down from the daemon's (the length of its init's NSpid). pid's
// own NSpid says how far below that level its namespace is, and
// NS_GET_PARENT walks up that far from its namespace to the one at the
// init's level, which is ino's or a sibling's. An error wrapping
// fs.ErrNotExist or ESRCH means pid is gone.
func nestedIn(pid int32, depth int, ino uint64) (bool, error) {
	nsp, err := procfs.NSpid("/proc", pid)
	if err != nil {
		return false, err
	}
	up := len(nsp) - depth
	if up <= 0 {
		return false, nil // not below the init's level
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/pid", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("pid %d's pid namespace: %w", pid, err)
	}
	for ; up > 0; up-- {
		parent, err := unix.IoctlRetInt(fd, nsGetParent)
		unix.Close(fd)
		if err != nil {
			return false, fmt.Errorf("pid %d's pid namespace's parent: %w", pid, err)
		}
		fd = parent
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("pid %d's pid namespace: %w", pid, err)
	}
	return st.Ino == ino, nil
}

// exitedGroup reports whether every thread of process pid has exited (a
// zombie waiting to be reaped, or gone): by a pidfd's poll, which /proc's
// state of the main thread is not. Any doubt (no pidfd for want of
// descriptors, a failed poll) is not exited.
func exitedGroup(pid int32) bool {
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	defer unix.Close(fd)
	return pidfd.FdExited(fd)
}
