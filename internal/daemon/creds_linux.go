package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/store"
)

// This file decides as whom, and within which limits, a workload runs:
// its caller's uid, groups and resource limits, never the daemon's.

// identity is the workload's uid, gid and supplementary groups.
type identity struct {
	uid, gid uint32
	groups   []uint32
	// callers is set when the workload runs as its caller, with the
	// groups its process has (bounds.groups): read in the window in which
	// the caller is found to be its uid alone.
	callers bool
}

// workloadIdentity resolves who runs a launch. A non-root caller's
// workload runs as the caller, with the groups its process has now; only
// root may name another uid or gid. A uid without a gid takes the user's
// primary group and supplementary groups from the user database, and a uid
// the database does not know needs an explicit gid.
func workloadIdentity(p api.Peer, r *api.LaunchRequest) (identity, error) {
	if !p.Root() && ((r.UID != nil && *r.UID != p.UID) || (r.GID != nil && *r.GID != p.GID)) {
		return identity{}, forbidden("only root may launch as another user")
	}
	// A caller but root naming its own uid or gid gets what it has, as
	// one naming neither: the groups from the user database were all of
	// its user's, given back to a caller that had dropped some (a
	// sandbox's child without the docker group regained it). Its groups
	// come with its bounds (workloadBounds).
	if (r.UID == nil && r.GID == nil) || !p.Root() {
		return identity{uid: p.UID, gid: p.GID, callers: true}, nil
	}
	id := identity{uid: p.UID, gid: p.GID}
	if r.UID != nil {
		id.uid = *r.UID
	}
	if r.GID != nil {
		id.gid = *r.GID
		id.groups = []uint32{id.gid}
		return id, nil
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(id.uid), 10))
	if err != nil {
		return identity{}, badRequest("uid %d is not in the user database (%v): give its gid", id.uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return identity{}, badRequest("uid %d has primary group %q: give its gid", id.uid, u.Gid)
	}
	id.gid = uint32(gid)
	gs, err := u.GroupIds()
	if err != nil {
		return identity{}, badRequest("groups of uid %d: %v: give its gid", id.uid, err)
	}
	for _, g := range gs {
		if v, err := strconv.ParseUint(g, 10, 32); err == nil {
			id.groups = append(id.groups, uint32(v))
		}
	}
	return id, nil
}

// rlimitNames names the resource limits, indexed by RLIMIT_*.
var rlimitNames = [...]string{"cpu", "fsize", "data", "stack", "core", "rss", "nproc", "nofile",
	"memlock", "as", "locks", "sigpending", "msgqueue", "nice", "rtprio", "rttime"}

// bounds are what a workload inherits of its caller's: its resource
// limits, umask and nice value, and whether it may gain privileges by exec.
type bounds struct {
	// limits are the workload's; clamped are those where the caller's
	// was lower than the daemon's, to record on the claim.
	limits  []spawn.Limit
	clamped []store.Limit
	// umask is the caller's (the Umask line of its status), or
	// privateUmask when it could not be read as the caller's.
	umask uint32
	// loginUID is the caller's audit login uid, nil when it is unset or
	// could not be read as the caller's (spawn.Spec.LoginUID).
	loginUID *uint32
	// nice is the caller's nice value, nil when it could not be read as
	// the caller's (root's caller gone). The shim takes it only where it
	// is less favourable than the daemon's own (spawn.Spec.Nice).
	nice *int
	// policy, ioprio and oomScoreAdj are the caller's scheduling policy,
	// I/O priority and oom_score_adj, and affinity its CPU mask, each nil
	// when it could not be read as the caller's; the shim weighs them
	// against the daemon's (spawn.Spec). A daemon under chrt, ionice or
	// an OOM protection gave its own to every job.
	policy, ioprio, oomScoreAdj *int
	affinity                    []uint64
	coredumpFilter              *uint32
	// seccompFrom is the caller's pid when it runs under seccomp filters
	// (Seccomp: 2 in its status), and caller a pidfd of it opened before
	// it was found alive: the shim reads the filters at that pid and
	// confirms through the pidfd that they were the caller's
	// (spawn.Spec.SeccompFrom). The caller closes it.
	seccompFrom int
	caller      *os.File
	// groups are the caller's supplementary groups, read from the
	// status that showed its uids to be the caller's alone, and nil
	// otherwise (identity.callers). Read apart, before the caller was
	// bound, they could be those of a setuid program it ran meanwhile.
	groups []uint32
	// noNewPrivs is set when the caller has no_new_privs, or (a caller
	// but root) a capability bounding set without some capability the
	// daemon's has: a workload free to exec setuid and file-capability
	// programs would be a way out of either. The daemon cannot narrow a
	// bounding set without CAP_SETPCAP (its unit does not give it), and
	// no_new_privs shuts that door whole. Root may raise its own.
	noNewPrivs bool
	// elsewhere is set when the caller's mount namespace or root (its
	// mount or its directory) is not the daemon's, or could not be read,
	// or when the workload joins any namespace of the caller's (below).
	// A workload in such a root reaches the daemon's mounts through
	// /proc/PID/root of any process of its uid, where setuid programs
	// keep their bit (their mount is in its namespace), and such a
	// program's loader and files would then be looked up in the caller's
	// tree: the caller's to write. So a caller but root gets no_new_privs
	// there (a user with a tmpfs root and its own ld-linux became root).
	elsewhere bool
	// root is the caller's root directory (O_PATH), the workload's: nil
	// when the daemon is not root (it serves its own uid, and may not
	// chroot), or for root's caller gone. The caller closes it.
	root *os.File
	// namespaces are the caller's mount, network, IPC and UTS
	// namespaces that are not the daemon's, for the workload to join
	// (nil where root is). The caller closes them.
	namespaces []spawn.Namespace
}

// mayRaiseLimits reports whether process pid, whose /proc status is st,
// may raise its hard limits: it holds CAP_SYS_RESOURCE (its CapEff line;
// unreadable counts as holding it) in the daemon's user namespace. The
// capabilities a process has in a user namespace of its own (unshare -U)
// do not reach the limits, which only the initial namespace's allow.
func mayRaiseLimits(pid int32, st []byte) bool {
	v, ok := procfs.LineValue(st, "CapEff:")
	if !ok {
		return true
	}
	caps, err := strconv.ParseUint(strings.TrimSpace(string(v)), 16, 64)
	if err != nil {
		return true
	}
	if caps&(1<<unix.CAP_SYS_RESOURCE) == 0 {
		return false
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(int(pid)) + "/ns/user")
	ours, oerr := os.Readlink("/proc/self/ns/user")
	return err != nil || oerr != nil || theirs == ours
}

// workloadBounds returns, limit by limit, the lower of the caller's (read
// now from its /proc/PID/limits: root here lacks CAP_SYS_RESOURCE, which
// prlimit of another user's process needs) and the daemon's own, and
// whether the workload must have no_new_privs (bounds). The caller is
// bound first and found alive after the reads, so what was read was its
// own. A caller but root that cannot be read, or whose pid now holds a
// process not of the caller's uid, is refused (ErrConflict): the peer's
// pid is the one it had when it connected, and a client that handed its
// connection to a child and exited used to get the daemon's limits
// (nofile 64 became 20,000). The caller's umask and nice value are read
// in the same window: a job ran with the daemon's (umask 0022, nice 0),
// so a user with umask 077 wrote files others could read, and one its
// admin had set to nice 15 ran its jobs at 0. So are its scheduling (callerSched)
// and its seccomp mode: a caller in strict mode is refused (ErrForbidden),
// and one under filters gets them carried (bounds.seccompFrom), or is
// refused (ErrConflict) when it cannot be bound for the shim's read.
func workloadBounds(ctx context.Context, p api.Peer, boot procfs.BootID) (bounds, error) {
	b := bounds{umask: privateUmask}
	var theirs procfs.Limits
	var status []byte
	known := false
	if alive, done := callerAlive(ctx, p, boot); alive != nil {
		l, err := procfs.ReadLimits("/proc", p.Pid)
		st, serr := os.ReadFile("/proc/" + strconv.Itoa(int(p.Pid)) + "/status")
		ids, ierr := procfs.ParseStatusUIDs(st) // one read of status, its uids, privileges and umask
		// The nice value of the caller's main thread (Linux's is per
		// thread; a process's own renice sets its main thread's). Raw,
		// getpriority returns 20 minus the nice value.
		prio, perr := unix.Getpriority(unix.PRIO_PROCESS, int(p.Pid))
		lu, lerr := os.ReadFile("/proc/" + strconv.Itoa(int(p.Pid)) + "/loginuid")
		sched := callerSched(p.Pid)
		mode := seccompMode(st)
		var callerFD *os.File
		if mode == seccompFilter {
			if fd, err := unix.PidfdOpen(int(p.Pid), 0); err == nil {
				callerFD = os.NewFile(uintptr(fd), "caller")
			}
		}
		root, rerr := callerRoot(p.Pid)
		nss, nerr := callerNamespaces(p.Pid)
		// A workload that joins any namespace of the caller's runs
		// there too: one made in a user namespace of the caller's is
		// the caller's to set up (its host name, network, IPC objects),
		// which a setuid program run there as root would trust.
		b.elsewhere = root != nil && (elsewhere(p.Pid, root) || len(nss) > 0)
		// Only the user's own: a setuid program (sudo raises its
		// limits before it asks for a password) or one with
		// CAP_SYS_RESOURCE the caller handed the connection to has
		// limits the user could not set.
		ours := serr == nil && ierr == nil && ids.Real == p.UID && ids.Effective == p.UID && ids.Saved == p.UID
		live := alive()
		known = ours && live && err == nil && rerr == nil && nerr == nil && perr == nil && sched.err == nil && !mayRaiseLimits(p.Pid, st)
		theirs, status = l, st
		done()
		var refused error
		if ours && live {
			if gs, err := procfs.ParseStatusGroups(st); err == nil {
				b.groups = gs
			}
			switch {
			case mode == seccompStrict:
				refused = forbidden("the caller (pid %d) is in seccomp's strict mode, which no workload can be started in", p.Pid)
			case mode == seccompFilter && callerFD == nil:
				refused = fmt.Errorf("the caller (pid %d) runs under seccomp filters, which its workload must run under, and cannot be bound to read them: %w", p.Pid, api.ErrConflict)
			case mode == seccompFilter:
				b.seccompFrom, b.caller, callerFD = int(p.Pid), callerFD, nil
			}
		}
		if callerFD != nil {
			callerFD.Close()
		}
		if refused != nil {
			if root != nil {
				root.Close()
			}
			closeNamespaces(nss)
			return bounds{}, refused
		}
		if known {
			b.root, b.namespaces = root, nss
			b.umask = statusUmask(st)
			nice := 20 - prio
			b.nice = &nice
			b.policy, b.ioprio, b.oomScoreAdj, b.affinity = &sched.policy, &sched.ioprio, &sched.oomScoreAdj, sched.affinity
			b.coredumpFilter = sched.coredumpFilter
			// A kernel without audit has no loginuid file: nothing to
			// carry. Unset (4294967295) is left as the shim has it.
			if v, err := strconv.ParseUint(strings.TrimSpace(string(lu)), 10, 32); lerr == nil && err == nil && v != unsetLoginUID {
				u := uint32(v)
				b.loginUID = &u
			}
		} else {
			if root != nil {
				root.Close()
			}
			closeNamespaces(nss)
		}
	}
	if !known && !p.Root() {
		return bounds{}, fmt.Errorf("the caller (pid %d) is gone, or no longer uid %d alone (real, effective and saved, without CAP_SYS_RESOURCE): its resource limits and root directory, which bound the workload, cannot be read as the user's: %w",
			p.Pid, p.UID, api.ErrConflict)
	}
	for res, name := range rlimitNames {
		var own unix.Rlimit
		if err := unix.Getrlimit(res, &own); err != nil {
			b.close()
			return bounds{}, fmt.Errorf("getrlimit %s: %w", name, err)
		}
		l := spawn.Limit{Resource: res, Soft: own.Cur, Hard: own.Max}
		if known {
			l.Hard = min(l.Hard, theirs[res][1])
			l.Soft = min(l.Soft, theirs[res][0], l.Hard)
			if l.Soft != own.Cur || l.Hard != own.Max {
				b.clamped = append(b.clamped, store.Limit{Name: name, Soft: l.Soft, Hard: l.Hard})
			}
		}
		b.limits = append(b.limits, l)
	}
	if known {
		nnp, bnd, err := privBounds(status)
		if err != nil && !p.Root() {
			b.close()
			return bounds{}, fmt.Errorf("the caller's (pid %d) status: %v: %w", p.Pid, err, api.ErrConflict)
		}
		b.noNewPrivs = nnp || !p.Root() && (bnd&ownCapBnd() != ownCapBnd() || b.elsewhere)
	}
	return b, nil
}

// schedOf is what callerSched reads.
type schedOf struct {
	policy, ioprio, oomScoreAdj int
	affinity                    []uint64
	coredumpFilter              *uint32 // nil: unread
	err                         error
}

// callerSched reads the scheduling policy, I/O priority and CPU affinity
// of process pid's main thread (the kernel keeps them per thread; a
// process's chrt, ionice or taskset sets its main thread's), and its
// oom_score_adj and coredump_filter. None of these reads needs a
// permission over the process.
func callerSched(pid int32) schedOf {
	var s schedOf
	attr, err := unix.SchedGetAttr(int(pid), 0)
	if err != nil {
		s.err = fmt.Errorf("sched_getattr: %w", err)
		return s
	}
	s.policy = int(attr.Policy)
	prio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, uintptr(pid), 0)
	if errno == unix.ENOSYS {
		prio, errno = 0, 0 // a kernel without a block layer: the class none
	}
	if errno != 0 {
		s.err = fmt.Errorf("ioprio_get: %w", errno)
		return s
	}
	s.ioprio = int(prio)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(int(pid), &set); err != nil {
		s.err = fmt.Errorf("sched_getaffinity: %w", err)
		return s
	}
	s.affinity = spawn.AffinityMask(&set)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/oom_score_adj")
	if err == nil {
		s.oomScoreAdj, err = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if err != nil {
		s.err = fmt.Errorf("oom_score_adj: %w", err)
		return s
	}
	// A kernel without ELF core dumps has no coredump_filter: none to
	// carry, and no reason to refuse the caller.
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/coredump_filter"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 32); err == nil {
			f := uint32(v)
			s.coredumpFilter = &f
		}
	}
	return s
}

// unsetLoginUID is the audit login uid of a process no login set one for.
const unsetLoginUID = 1<<32 - 1

// privateUmask is the umask of a workload whose caller's could not be
// read: a kernel before 4.7 has no Umask line in /proc/PID/status, and
// root's caller may be gone. The daemon's own (0022, the unit's UMask=)
// would make the workload's files readable by every user, more open than
// a caller with umask 077 made them; 0077 is never more open than the
// caller's, and a caller that wants more opens them itself (umask 022 in
// its command). Refusing the launch instead would refuse every launch on
// such a kernel for a setting the caller can give in its command.
const privateUmask = 0o077

// statusUmask returns the umask of a /proc/PID/status, or privateUmask
// when it has no Umask line or the line does not parse.
func statusUmask(status []byte) uint32 {
	v, ok := procfs.LineValue(status, "Umask:")
	if !ok {
		return privateUmask
	}
	u, err := strconv.ParseUint(string(v), 8, 32)
	if err != nil || u > 0o777 {
		return privateUmask
	}
	return uint32(u)
}

// callerAlive returns a check that the process that made the request's
// connection is still alive, and done to release it; nil when none can be
// had (the peer is gone). The process is the one the socket holds
// (api.PeerPidfd), even if its pid was reissued since: what was read at
// its pid before the check passes was its own. Before Linux 6.5 it is the
// process at the peer's pid now.
func callerAlive(ctx context.Context, p api.Peer, boot procfs.BootID) (alive func() bool, done func()) {
	fd, err := api.PeerPidfd(ctx)
	if err != nil && !errors.Is(err, api.ErrNoPeerPidfd) {
		return nil, nil // the socket's peer is gone: its pid names another
	}
	if err == nil {
		return func() bool { return pidfd.FdAlive(fd) }, func() {
			unix.Close(fd)
		}
	}
	if p.Pid <= 0 {
		return nil, nil
	}
	h, err := pidfd.Open(p.Pid, boot)
	if err != nil {
		return nil, nil
	}
	return func() bool { return !h.Exited() }, func() { h.Close() }
}

// world is what elsewhere compares: a mount namespace, and a root's
// mount and directory.
type world struct {
	mntDev, mntIno uint64
	rootMnt        uint64
	rootDev        uint64
	rootIno        uint64
}

// worldOf reads the world of the mount namespace at nsPath and the root
// directory fd (AT_FDCWD with root "/").
func worldOf(nsPath string, fd int, root string) (world, error) {
	var ns unix.Stat_t
	if err := unix.Stat(nsPath, &ns); err != nil {
		return world{}, err
	}
	flags := unix.AT_SYMLINK_NOFOLLOW
	if root == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var st unix.Statx_t
	if err := unix.Statx(fd, root, flags, unix.STATX_INO|unix.STATX_MNT_ID, &st); err != nil {
		return world{}, err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return world{}, errors.New("statx gave no mount id")
	}
	return world{mntDev: ns.Dev, mntIno: ns.Ino, rootMnt: st.Mnt_id,
		rootDev: unix.Mkdev(st.Dev_major, st.Dev_minor), rootIno: st.Ino}, nil
}

// ownWorld is the daemon's, read once.
var ownWorld = sync.OnceValues(func() (world, error) {
	return worldOf("/proc/self/ns/mnt", unix.AT_FDCWD, "/")
})

// elsewhere reports whether process pid, whose root directory is open as
// root, lives in another mount namespace or under another root than the
// daemon (or either could not be read).
func elsewhere(pid int32, root *os.File) bool {
	own, err := ownWorld()
	if err != nil {
		return true
	}
	theirs, err := worldOf("/proc/"+strconv.Itoa(int(pid))+"/ns/mnt", int(root.Fd()), "")
	return err != nil || theirs != own
}

// The modes of the Seccomp line of /proc/PID/status.
const (
	seccompNone   = 0
	seccompStrict = 1
	seccompFilter = 2
)

// seccompMode returns the Seccomp line's mode of a /proc/PID/status, or
// seccompNone when it has none (a kernel without seccomp) or it does not
// parse.
func seccompMode(status []byte) int {
	v, ok := procfs.LineValue(status, "Seccomp:")
	if !ok {
		return seccompNone
	}
	m, err := strconv.Atoi(string(bytes.TrimSpace(v)))
	if err != nil || m < seccompNone || m > seccompFilter {
		return seccompNone
	}
	return m
}

// close releases what b holds.
func (b *bounds) close() {
	if b.caller != nil {
		b.caller.Close()
		b.caller = nil
	}
	if b.root != nil {
		b.root.Close()
		b.root = nil
	}
	closeNamespaces(b.namespaces)
	b.namespaces = nil
}

// joined are the namespaces a workload joins when its caller's is not the
// daemon's, the mount namespace last (see spawn.Attr). A workload left in
// the daemon's would be out of its caller's sandbox: a private network
// (its host's interfaces), IPC objects, host name, and a mount namespace
// whose mounts (a tmpfs over a secret) came apart under the workload once
// the caller's last process had gone. Not joined: the pid namespace (a
// caller in another is refused), the user namespace (the workload's
// credentials are the daemon's to set), the cgroup namespace (a workload
// runs in its grant's cgroup) and the time namespace.
var joined = [...]struct {
	name string
	typ  int
}{{"net", unix.CLONE_NEWNET}, {"ipc", unix.CLONE_NEWIPC}, {"uts", unix.CLONE_NEWUTS}, {"mnt", unix.CLONE_NEWNS}}

// callerNamespaces opens those namespaces of process pid (joined) that are
// neither the daemon's nor the host's (pid 1's, which live as long as the
// host: a workload in the daemon's root or chrooted into its caller's
// host root loses nothing), or returns nil when the daemon is not root (it
// serves its own uid and may not join any). Joining needs CAP_SYS_ADMIN:
// a daemon without it fails the launch of a caller in a namespace of its
// own (the shim says so) rather than start the workload outside. The
// caller checks pid is still its caller after, and closes them.
func callerNamespaces(pid int32) ([]spawn.Namespace, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var nss []spawn.Namespace
	for _, j := range joined {
		path := "/proc/" + strconv.Itoa(int(pid)) + "/ns/" + j.name
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeNamespaces(nss)
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		var theirs unix.Stat_t
		if err := unix.Fstat(fd, &theirs); err != nil {
			unix.Close(fd)
			closeNamespaces(nss)
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
		if sameNS("/proc/self/ns/"+j.name, &theirs) || sameNS("/proc/1/ns/"+j.name, &theirs) {
			unix.Close(fd)
			continue
		}
		nss = append(nss, spawn.Namespace{File: os.NewFile(uintptr(fd), path), Type: j.typ})
	}
	return nss, nil
}

// sameNS reports whether the namespace file at path is the one st was
// read from.
func sameNS(path string, st *unix.Stat_t) bool {
	var o unix.Stat_t
	return unix.Stat(path, &o) == nil && o.Dev == st.Dev && o.Ino == st.Ino
}

// closeNamespaces closes each namespace's file.
func closeNamespaces(nss []spawn.Namespace) {
	for _, ns := range nss {
		ns.File.Close()
	}
}

// callerRoot opens the root directory of process pid (O_PATH), or returns
// nil when the daemon is not root.
func callerRoot(pid int32) (*os.File, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	path := "/proc/" + strconv.Itoa(int(pid)) + "/root"
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// privBounds reads NoNewPrivs and CapBnd of a /proc/PID/status.
func privBounds(status []byte) (nnp bool, bnd uint64, err error) {
	v, ok := procfs.LineValue(status, "NoNewPrivs:")
	if !ok {
		return false, 0, fmt.Errorf("no NoNewPrivs line")
	}
	nnp = string(bytes.TrimSpace(v)) == "1"
	v, ok = procfs.LineValue(status, "CapBnd:")
	if !ok {
		return false, 0, fmt.Errorf("no CapBnd line")
	}
	bnd, err = strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
	if err != nil {
		return false, 0, fmt.Errorf("CapBnd: %w", err)
	}
	return nnp, bnd, nil
}

// ownCapBnd is the daemon's capability bounding set, read once (all
// bits set, so that every caller counts as narrower, if unreadable).
var ownCapBnd = sync.OnceValue(func() uint64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ^uint64(0)
	}
	if _, bnd, err := privBounds(st); err == nil {
		return bnd
	}
	return ^uint64(0)
})
