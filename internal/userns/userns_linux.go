package userns

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Requests the x/sys/unix version in use does not name (linux/nsfs.h,
// linux/pidfd.h).
const (
	nsGetParent           = 0xb702 // _IO(0xb7, 0x2)
	nsGetOwnerUID         = 0xb704 // _IO(0xb7, 0x4)
	pidfdGetUserNamespace = 0xff09 // _IO(0xff, 9)
	// maxDepth bounds the walk: the kernel nests user namespaces 32 deep.
	maxDepth = 33
)

// own is the inode of this process's user namespace.
var own = sync.OnceValues(func() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &st); err != nil {
		return 0, fmt.Errorf("own user namespace: %w", err)
	}
	return st.Ino, nil
})

// Account returns the uid whose share the process behind pidfd (pid, uid
// as this process sees it) draws on: uid, unless the process is in a user
// namespace below this process's whose outermost one a user other than
// root created: then that user. An error leaves the caller to choose (the
// api package charges uid).
func Account(pidfd int, pid int32, uid uint32) (uint32, error) {
	nsfd, err := userNamespace(pidfd, pid)
	if err != nil {
		return uid, err
	}
	defer func() { unix.Close(nsfd) }()
	self, err := own()
	if err != nil {
		return uid, err
	}
	for range maxDepth {
		ino, err := inode(nsfd)
		if err != nil {
			return uid, err
		}
		if ino == self {
			return uid, nil // this process's own namespace
		}
		parent, err := unix.IoctlRetInt(nsfd, nsGetParent)
		if errors.Is(err, unix.EPERM) {
			// Its parent is not below this process's namespace: not one
			// this process can attribute (a socket passed across).
			return uid, nil
		}
		if err != nil {
			return uid, fmt.Errorf("parent of a user namespace: %w", err)
		}
		pino, err := inode(parent)
		if err != nil {
			unix.Close(parent)
			return uid, err
		}
		if pino != self {
			unix.Close(nsfd)
			nsfd = parent
			continue
		}
		unix.Close(parent)
		owner, err := unix.IoctlGetUint32(nsfd, nsGetOwnerUID)
		if err != nil {
			return uid, fmt.Errorf("owner of a user namespace: %w", err)
		}
		if owner == 0 {
			return uid, nil
		}
		return owner, nil
	}
	return uid, errors.New("user namespaces nested deeper than the kernel allows")
}

// userNamespace opens the user namespace of the process behind pidfd.
func userNamespace(pidfd int, pid int32) (int, error) {
	fd, err := unix.IoctlRetInt(pidfd, pidfdGetUserNamespace)
	if err == nil {
		return fd, nil
	}
	return procUserNamespace(pidfd, pid)
}

// procUserNamespace is userNamespace for kernels before 6.11.
func procUserNamespace(pidfd int, pid int32) (int, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(int(pid))+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("user namespace of %d: %w", pid, err)
	}
	// The pid named the process the pidfd holds only if that process was
	// still there after the open.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil && !errors.Is(err, unix.EPERM) {
		unix.Close(fd)
		return -1, fmt.Errorf("user namespace of %d: the process is gone: %w", pid, err)
	}
	return fd, nil
}

func inode(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("user namespace: %w", err)
	}
	return st.Ino, nil
}
