package api

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/userns"
)

// peerCred reads SO_PEERCRED of a Unix socket connection: the pid (in the
// reader's pid namespace), uid and gid of the process that connected.
func peerCred(c net.Conn) (Peer, error) {
	_, cred, err := ucredOf(c)
	if err != nil {
		return Peer{}, err
	}
	return Peer{Pid: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}

// peerOf is the server's view of a connection's peer: its credentials,
// whose share it draws on, and whether it runs in the daemon's pid
// namespace and under the daemon's root directory. What is read through
// the peer's pidfd is confirmed by the process being alive after it: a
// peer that has gone counts as running elsewhere.
func peerOf(c net.Conn) (Peer, error) {
	raw, cred, err := ucredOf(c)
	if err != nil {
		return Peer{}, err
	}
	p := Peer{Pid: cred.Pid, UID: cred.Uid, GID: cred.Gid}
	pidfd := peerPidfd(raw, cred.Pid)
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if p.UID != 0 {
		if acct := userns.SubordinateOf(nsShareOf(pidfd, cred)); acct != p.UID {
			p.ShareUID = acct
		}
	}
	// A daemon that is not root serves its own uid alone, and may not
	// read another's namespaces: the backend refuses such a peer itself.
	if euid := os.Geteuid(); euid == 0 || cred.Uid == uint32(euid) {
		p.PidNS, p.OtherPidNS, p.OtherRoot = placeOf(pidfd, cred.Pid)
	}
	return p, nil
}

func ucredOf(c net.Conn) (syscall.RawConn, *unix.Ucred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, nil, errors.New("not a socket connection")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, nil, err
	}
	if serr != nil {
		return nil, nil, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return raw, cred, nil
}

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5), which the x/sys/unix version in
// use does not name.
const soPeerPidfd = 77

// peerPidfd is a pidfd of the peer: the one the socket holds (SO_PEERPIDFD:
// the process that connected, even if its pid was reissued since), else
// one opened now by pid (before Linux 6.5: the pid may have been reissued
// if the peer has gone), else -1.
func peerPidfd(raw syscall.RawConn, pid int32) int {
	pidfd := -1
	_ = raw.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPidfd); err == nil {
			pidfd = v
		}
	})
	if pidfd < 0 {
		if fd, err := unix.PidfdOpen(int(pid), 0); err == nil {
			pidfd = fd
		}
	}
	return pidfd
}

// nsShareOf is userns.Account of the peer through its pidfd, or its uid
// when that cannot be had. peerOf then maps a uid in a user's /etc/subuid
// range to that user (a workload the daemon started for a client in a
// namespace runs as its subordinate uid outside it).
func nsShareOf(pidfd int, cred *unix.Ucred) uint32 {
	if pidfd < 0 {
		return cred.Uid
	}
	acct, err := userns.Account(pidfd, cred.Pid, cred.Uid)
	if err != nil {
		return cred.Uid
	}
	return acct
}

// place is where a process runs: its pid namespace and root directory.
type place struct {
	ns, root unix.Stat_t
	err      error
}

// ownPlace is the daemon's place, read once.
var ownPlace = sync.OnceValue(func() place {
	var p place
	if err := unix.Stat("/proc/self/ns/pid", &p.ns); err != nil {
		p.err = fmt.Errorf("stat /proc/self/ns/pid: %w", err)
	} else if err := unix.Stat("/", &p.root); err != nil {
		p.err = fmt.Errorf("stat /: %w", err)
	}
	return p
})

// placeOf compares the peer's pid namespace and root directory with the
// daemon's: pidNS is the inode of the peer's pid namespace (0 unread);
// otherNS and otherRoot are true where they differ or could not be read
// and confirmed (the peer had gone, or no pidfd of it could be had).
func placeOf(pidfd int, pid int32) (pidNS uint64, otherNS, otherRoot bool) {
	own := ownPlace()
	dir := "/proc/" + strconv.Itoa(int(pid))
	var ns, root unix.Stat_t
	nsErr := unix.Stat(dir+"/ns/pid", &ns)
	rootErr := unix.Stat(dir+"/root", &root)
	if pidfd < 0 || unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return 0, true, true
	}
	if nsErr == nil {
		pidNS = ns.Ino
	}
	otherNS = own.err != nil || nsErr != nil || ns.Dev != own.ns.Dev || ns.Ino != own.ns.Ino
	otherRoot = own.err != nil || rootErr != nil || root.Dev != own.root.Dev || root.Ino != own.root.Ino
	return pidNS, otherNS, otherRoot
}

// ownPidNS is the inode of the daemon's pid namespace (0 unread).
func ownPidNS() uint64 {
	if p := ownPlace(); p.err == nil {
		return p.ns.Ino
	}
	return 0
}
