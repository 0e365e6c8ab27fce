package api

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/userns"
)

// peerCred reads SO_PEERCRED of a Unix socket connection.
func peerCred(c net.Conn) (Peer, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Peer{}, errors.New("not a socket connection")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if serr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	p := Peer{Pid: cred.Pid, UID: cred.Uid, GID: cred.Gid}
	if p.UID != 0 {
		if acct := shareOf(raw, cred); acct != p.UID {
			p.ShareUID = acct
		}
	}
	return p, nil
}

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5), which the x/sys/unix version in
// use does not name.
const soPeerPidfd = 77

// shareOf is userns.Account of the peer, through the pidfd the socket
// holds of it (SO_PEERPIDFD: the process that connected, even if its pid
// was reissued since), else one opened now by pid, or its uid when neither
// can be had; then the owner of that uid's /etc/subuid range, if any (a
// workload the daemon started for a client in a namespace runs as its
// subordinate uid outside it).
func shareOf(raw syscall.RawConn, cred *unix.Ucred) uint32 {
	return userns.SubordinateOf(nsShareOf(raw, cred))
}

// nsShareOf is the userns.Account part of shareOf.
func nsShareOf(raw syscall.RawConn, cred *unix.Ucred) uint32 {
	pidfd := -1
	_ = raw.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPidfd); err == nil {
			pidfd = v
		}
	})
	if pidfd < 0 {
		fd, err := unix.PidfdOpen(int(cred.Pid), 0)
		if err != nil {
			return cred.Uid
		}
		pidfd = fd
	}
	defer unix.Close(pidfd)
	acct, err := userns.Account(pidfd, cred.Pid, cred.Uid)
	if err != nil {
		return cred.Uid
	}
	return acct
}
