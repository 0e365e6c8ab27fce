package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	pidfdpkg "github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
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
// namespace. What is read through the peer's pidfd is confirmed by the
// process being alive after it: a peer that has gone counts as running
// elsewhere.
func peerOf(c net.Conn) (Peer, error) {
	r, err := startPeer(c)
	if err != nil {
		return Peer{}, err
	}
	return r.finish(c), nil
}

// peerRead is a peer read in two steps: startPeer, on the accept loop,
// reads what admission needs (SO_PEERCRED) and finish, on a goroutine of
// its own, the rest, which costs some tens of microseconds (a pidfd,
// user namespace ioctls, a stat in /proc).
type peerRead struct {
	cred unix.Ucred
	// pidfd is the peer's, opened by startPeer where the socket cannot
	// give one later (before Linux 6.5), so that a pid reissued after the
	// accept is not taken for the peer; else -1.
	pidfd int
}

// startPeer reads the peer's credentials (SO_PEERCRED), and, before Linux
// 6.5, opens a pidfd of it by its pid. The caller calls finish or drop.
func startPeer(c net.Conn) (peerRead, error) {
	_, cred, err := ucredOf(c)
	if err != nil {
		return peerRead{}, err
	}
	r := peerRead{cred: *cred, pidfd: -1}
	if !havePeerPidfd() {
		if fd, err := unix.PidfdOpen(int(cred.Pid), 0); err == nil {
			r.pidfd = fd
		}
	}
	return r, nil
}

// share is the accounting key of a peer before finish: its uid, or the
// user whose /etc/subuid range it is in. finish may name another user
// (the one whose user namespace the peer runs in), by which the peer is
// then admitted.
func (r peerRead) share() uint32 {
	if r.cred.Uid != 0 {
		if acct := userns.SubordinateOf(r.cred.Uid); acct != 0 {
			return acct
		}
	}
	return r.cred.Uid
}

// drop releases what startPeer opened, for a connection not served.
func (r peerRead) drop() {
	if r.pidfd >= 0 {
		unix.Close(r.pidfd)
	}
}

// finish reads the rest of the peer: whose share it draws on and its pid
// namespace, through its pidfd.
func (r peerRead) finish(c net.Conn) Peer {
	cred := &r.cred
	p := Peer{Pid: cred.Pid, UID: cred.Uid, GID: cred.Gid}
	pidfd := r.pidfd
	if pidfd < 0 {
		pidfd, p.Short = socketPidfd(c, cred.Pid)
	}
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
		p.PidNS, p.OtherPidNS = placeOf(pidfd, cred.Pid)
	}
	return p
}

// confinable reports whether peer p, as its request comes (ctx), may be
// confined in ways the daemon cannot see (WithRefuseConfinable): a thread
// of it has no_new_privs (it is per thread, as a Landlock domain without
// TSYNC is), its user namespace is not the daemon's, its main thread has
// exited (a zombie leader's status and namespaces are not the live
// threads'), or any of these could not be read and then confirmed,
// through the connection's pidfd, to be the peer's. Neither
// no_new_privs nor leaving a user namespace can be undone, so what holds
// when the request is read held when it was sent.
func confinable(ctx context.Context, p Peer) bool {
	pidfd, err := PeerPidfd(ctx)
	if errors.Is(err, ErrNoPeerPidfd) {
		pidfd, err = unix.PidfdOpen(int(p.Pid), 0) // before Linux 6.5: by pid
	}
	if err != nil {
		return true
	}
	defer unix.Close(pidfd)
	dir := "/proc/" + strconv.Itoa(int(p.Pid))
	var ns, own unix.Stat_t
	if unix.Stat(dir+"/ns/user", &ns) != nil || unix.Stat("/proc/self/ns/user", &own) != nil || ns.Dev != own.Dev || ns.Ino != own.Ino {
		return true
	}
	st, err := os.ReadFile(dir + "/status")
	if err != nil {
		return true
	}
	if v, ok := procfs.LineValue(st, "State:"); !ok || strings.HasPrefix(strings.TrimSpace(string(v)), "Z") {
		return true
	}
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil || len(tasks) == 0 {
		return true
	}
	for _, task := range tasks {
		st, err := os.ReadFile(dir + "/task/" + task.Name() + "/status")
		if err != nil {
			continue // a thread that exited since the listing
		}
		if v, ok := procfs.LineValue(st, "NoNewPrivs:"); !ok || strings.TrimSpace(string(v)) != "0" {
			return true
		}
	}
	return unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil // gone: what was read may be another process's
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

// havePeerPidfd reports whether sockets give a pidfd of their peer
// (SO_PEERPIDFD, Linux 6.5), asked once of a socket pair.
var havePeerPidfd = sync.OnceValue(func() bool {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	fd, err := unix.GetsockoptInt(fds[0], unix.SOL_SOCKET, soPeerPidfd)
	if err != nil {
		return !errors.Is(err, unix.ENOPROTOOPT)
	}
	unix.Close(fd)
	return true
})

// socketPidfd is a pidfd of the peer: the one the socket holds
// (SO_PEERPIDFD: the process that connected, even if its pid was reissued
// since), else, on kernels whose sockets give none (before Linux 6.5),
// one opened now by pid (the pid may have been reissued if the peer has
// gone), else -1, with short set when that was for a want of descriptors
// or memory (pidfd.Short).
func socketPidfd(c net.Conn, pid int32) (pidfd int, short bool) {
	pidfd = -1
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPidfd)
				if err == nil {
					pidfd = v
				}
				short = pidfdpkg.Short(err)
			})
		}
	}
	// By pid only where sockets give no pidfd: where they do and this
	// one did not, the peer has gone, and its pid may be another's.
	if pidfd < 0 && !havePeerPidfd() {
		fd, err := unix.PidfdOpen(int(pid), 0)
		if err == nil {
			pidfd = fd
		}
		short = pidfdpkg.Short(err)
	}
	return pidfd, short
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

// ownNS is the daemon's pid namespace, read once.
var ownNS = sync.OnceValues(func() (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return st, fmt.Errorf("stat /proc/self/ns/pid: %w", err)
	}
	return st, nil
})

// placeOf compares the peer's pid namespace with the daemon's: pidNS is
// the inode of the peer's (0 unread); otherNS is true where they differ
// or the peer's could not be read and confirmed (the peer had gone, or no
// pidfd of it could be had).
func placeOf(pidfd int, pid int32) (pidNS uint64, otherNS bool) {
	var ns unix.Stat_t
	nsErr := unix.Stat("/proc/"+strconv.Itoa(int(pid))+"/ns/pid", &ns)
	if pidfd < 0 || unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil || nsErr != nil {
		return 0, true
	}
	own, err := ownNS()
	return ns.Ino, err != nil || ns.Dev != own.Dev || ns.Ino != own.Ino
}

// ownPidNS is the inode of the daemon's pid namespace (0 unread).
func ownPidNS() uint64 {
	if st, err := ownNS(); err == nil {
		return st.Ino
	}
	return 0
}

// ErrNoPeerPidfd: the connection cannot name its peer by a pidfd (the
// kernel predates SO_PEERPIDFD, Linux 6.5, or the context is no request's).
var ErrNoPeerPidfd = errors.New("no pidfd of the peer")

// PeerPidfd returns a pidfd of the process that made the connection of
// the request ctx belongs to (SO_PEERPIDFD: that process, even if its pid
// was reissued since), which the caller closes. It fails with
// ErrNoPeerPidfd where the socket cannot give one, and otherwise with the
// kernel's error (the peer has gone, on kernels that give no pidfd of a
// reaped process).
func PeerPidfd(ctx context.Context) (int, error) {
	gc, _ := ctx.Value(connKey{}).(*gateConn)
	if gc == nil {
		return -1, ErrNoPeerPidfd
	}
	sc, ok := gc.Conn.(syscall.Conn)
	if !ok {
		return -1, ErrNoPeerPidfd
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, serr := -1, error(nil)
	if err := raw.Control(func(s uintptr) {
		fd, serr = unix.GetsockoptInt(int(s), unix.SOL_SOCKET, soPeerPidfd)
	}); err != nil {
		return -1, err
	}
	switch {
	case errors.Is(serr, unix.ENOPROTOOPT):
		return -1, ErrNoPeerPidfd
	case serr != nil:
		return -1, fmt.Errorf("SO_PEERPIDFD: %w", serr)
	}
	return fd, nil
}
