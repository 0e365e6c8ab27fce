package spawn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/seccomp"
)

// Attr is how the shim is forked: the workload's working directory,
// standard descriptors, credentials, and cgroup.
type Attr struct {
	Dir   string
	Files [3]*os.File
	// Cred, when set, are the workload's credentials (the daemon is root).
	Cred *syscall.Credential
	// CgroupFD, when >= 0, is a cgroup directory to start in.
	CgroupFD int
	// Root, when not nil, is the directory (opened O_PATH) that becomes
	// the workload's root: its caller's, so that the workload sees the
	// files its caller sees (a chroot, a bind mount, another mount
	// namespace's tree) and not the daemon's. Dir is then in it.
	Root *os.File
	// Namespaces are the caller's namespaces the workload joins before
	// it enters Root, in order (a mount namespace last: joining it moves
	// the root directory to the namespace's).
	Namespaces []Namespace
	// Caller, with Spec.SeccompFrom, is a pidfd of the caller whose
	// seccomp filters the workload takes.
	Caller *os.File
}

// Namespace is a namespace to join: an open /proc/PID/ns/* file and its
// CLONE_NEW* type.
type Namespace struct {
	File *os.File
	Type int
}

// Process is a started workload.
type Process struct {
	Pid int32
	// Pidfd names the process from its fork; the caller closes it.
	Pidfd int
}

// rootFD is the shim's descriptor of Attr.Root, after 0-2, the spec (3)
// and the status pipe (4); Attr.Namespaces follow it.
const rootFD = 5

// setupMark starts the shim's status message of a SetupError, callerMark
// one of a CallerError: bytes no message of a failed exec starts with (it
// names argv[0] or a path).
const (
	setupMark  = "\x00"
	callerMark = "\x01"
)

// execTimeout bounds the wait for the shim to exec (a variable for the
// tests).
var execTimeout = 10 * time.Second

// Start forks the shim as the workload and hands it spec. started, when
// not nil, runs once the process exists and before the shim is told to go
// on (the daemon reads its token from the pidfd there). It returns when
// the workload has been exec'd, with an *ExecError when the exec failed
// (the process has exited then; the caller reaps it). A cgroup that refuses
// the fork is an error wrapping the fork's, so the caller can retry without.
func Start(spec Spec, attr Attr, started func(Process) error) (Process, error) {
	spec.Dir = attr.Dir
	if c := attr.Cred; c != nil {
		spec.Cred = &Cred{UID: c.Uid, GID: c.Gid, Groups: c.Groups}
		if spec.Cred.Groups == nil {
			spec.Cred.Groups = []uint32{}
		}
	}
	if attr.Root != nil {
		spec.Root = rootFD
	}
	for i, ns := range attr.Namespaces {
		spec.Namespaces = append(spec.Namespaces, NamespaceFD{FD: rootFD + 1 + i, Type: ns.Type})
	}
	if attr.Caller != nil {
		spec.CallerFD = rootFD + 1 + len(attr.Namespaces)
	}
	body, err := json.Marshal(spec)
	if err != nil {
		return Process{}, fmt.Errorf("spawn spec: %w", err)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return Process{}, err
	}
	defer specR.Close()
	defer specW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		return Process{}, err
	}
	defer statR.Close()
	defer statW.Close()

	pidfd := -1
	// The shim forks as the daemon's user and takes the workload's
	// credentials itself, after its limits (see the package comment).
	sys := &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd}
	if attr.CgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, attr.CgroupFD
	}
	files := []*os.File{attr.Files[0], attr.Files[1], attr.Files[2], specR, statW}
	if attr.Root != nil || len(attr.Namespaces) > 0 || attr.Caller != nil {
		files = append(files, attr.Root) // descriptor rootFD (nil: none)
	}
	for _, ns := range attr.Namespaces {
		files = append(files, ns.File)
	}
	if attr.Caller != nil {
		files = append(files, attr.Caller)
	}
	proc, err := os.StartProcess("/proc/self/exe", []string{ShimName}, &os.ProcAttr{Env: []string{}, Files: files, Sys: sys})
	if err != nil {
		return Process{}, fmt.Errorf("fork: %w", err)
	}
	p := Process{Pid: int32(proc.Pid), Pidfd: pidfd}
	proc.Release()
	specR.Close()
	statW.Close()
	if started != nil {
		if err := started(p); err != nil {
			unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
			return p, err
		}
	}
	if _, err := specW.Write(body); err != nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		return p, fmt.Errorf("spawn spec: %w", err)
	}
	specW.Close()
	statR.SetReadDeadline(time.Now().Add(execTimeout))
	msg, err := io.ReadAll(io.LimitReader(statR, 4096))
	switch {
	case err != nil && spec.SeccompFrom > 0:
		// The caller's filters, attached last, may refuse the exec and
		// the exit both: the shim then runs on as the user's until
		// killed here.
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		return p, &CallerError{Reason: fmt.Sprintf("the workload did not exec: under the caller's seccomp filters, which may refuse it: %v", err)}
	case err != nil:
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		return p, fmt.Errorf("waiting for the exec: %w", err)
	}
	if len(msg) > 0 {
		// The shim failed: it exits, or, when the caller's filters
		// refuse that, waits here to be killed.
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	}
	switch {
	case bytes.HasPrefix(msg, []byte(setupMark)):
		return p, &SetupError{Reason: string(msg[len(setupMark):])}
	case bytes.HasPrefix(msg, []byte(callerMark)):
		return p, &CallerError{Reason: string(msg[len(callerMark):])}
	case len(msg) > 0:
		return p, &ExecError{Reason: string(msg)}
	}
	return p, nil
}

// Main becomes the shim when this process was started as one (argv[0] is
// ShimName and nothing follows); otherwise it returns at once. It never
// returns as the shim: it execs the workload or exits 127.
func Main() {
	if len(os.Args) != 1 || os.Args[0] != ShimName {
		return
	}
	// Per-thread state (no_new_privs) must be on the thread that execs.
	runtime.LockOSThread()
	nameShim()
	status := os.NewFile(statusLast(), "status")
	// fail never returns: once the caller's filters are attached they
	// may refuse the exit itself, and a fail that returned went on to
	// the exec (a launch answered 409 ran its workload, unclaimed, under
	// part of the filters). The pipe's end tells the daemon, which kills
	// this process through its pidfd.
	fail := func(format string, args ...any) {
		fmt.Fprintf(status, format, args...)
		status.Close()
		os.Exit(127)
		for {
			unix.Pause()
		}
	}
	// setupFail is for the steps the shim takes as root's: their failure
	// is the daemon's (a capability it lacks), not the workload's.
	setupFail := func(format string, args ...any) {
		fail(setupMark+format, args...)
	}
	// callerFail is for what the shim could not take from the caller
	// because of the caller's state.
	callerFail := func(format string, args ...any) {
		fail(callerMark+format, args...)
	}
	// Everything above 2 closes at exec: the spec and status pipes, and
	// whatever else this process holds.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		setupFail("close_range: %v", err)
	}
	b, err := io.ReadAll(io.LimitReader(os.NewFile(3, "spec"), 4<<20))
	if err != nil {
		setupFail("reading the spec: %v", err)
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil || len(spec.Argv) == 0 {
		setupFail("bad spec: %v", err)
	}
	var filters []seccomp.Filter
	if spec.SeccompFrom > 0 {
		// Read first, while nothing of the caller's is entered: the pid
		// is in the daemon's pid namespace. The caller is found alive
		// through its pidfd before the read (so the pid is not yet
		// another process's, whom the shim would hold stopped for the
		// read) and after it (so what was read was the caller's).
		if spec.CallerFD <= 0 || !alive(spec.CallerFD) {
			callerFail("the caller (pid %d) exited before its seccomp filters were read", spec.SeccompFrom)
		}
		fs, err := seccomp.Read(spec.SeccompFrom, func() bool { return alive(spec.CallerFD) })
		if err != nil {
			callerFail("the caller's seccomp filters, which the workload must run under: %v", err)
		}
		if !alive(spec.CallerFD) {
			callerFail("the caller (pid %d) exited while its seccomp filters were read", spec.SeccompFrom)
		}
		filters = seccomp.Dedupe(fs)
	}
	for _, l := range spec.Limits {
		if err := unix.Setrlimit(l.Resource, &unix.Rlimit{Cur: l.Soft, Max: l.Hard}); err != nil {
			setupFail("setrlimit %d: %v", l.Resource, err)
		}
	}
	if spec.LoginUID != nil {
		// Before any namespace or root of the caller's is entered:
		// this /proc is the daemon's. The login uid is a task's: this
		// thread's, the one that execs.
		if err := setLoginUID(*spec.LoginUID); err != nil {
			setupFail("the caller's audit login uid %d: %v", *spec.LoginUID, err)
		}
	}
	// Before any namespace or root of the caller's is entered, as the
	// login uid: this /proc is the daemon's.
	if spec.CoredumpFilter != nil {
		if err := os.WriteFile("/proc/self/coredump_filter", []byte("0x"+strconv.FormatUint(uint64(*spec.CoredumpFilter), 16)), 0); err != nil {
			setupFail("the caller's coredump_filter %#x: %v", *spec.CoredumpFilter, err)
		}
	}
	if spec.OOMScoreAdj != nil {
		if err := takeOOMScoreAdj(*spec.OOMScoreAdj); err != nil {
			setupFail("the caller's oom_score_adj %d: %v", *spec.OOMScoreAdj, err)
		}
	}
	nice, err := takeSched(spec.Policy, spec.Nice)
	if err != nil {
		setupFail("the caller's scheduling (policy %s, nice %s): %v", optional(spec.Policy), optional(spec.Nice), err)
	}
	if err := takeIOPrio(spec.IOPrio, nice); err != nil {
		setupFail("the caller's I/O priority %s: %v", optional(spec.IOPrio), err)
	}
	if len(spec.Affinity) > 0 {
		takeAffinity(spec.Affinity)
	}
	if len(spec.Namespaces) > 0 {
		// Joining a mount namespace needs a filesystem context (root,
		// cwd) of this thread's own: Go's threads share one, and setns
		// refuses it then. This thread execs, and takes it along.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			setupFail("unshare CLONE_FS: %v", err)
		}
		for _, ns := range spec.Namespaces {
			if err := unix.Setns(ns.FD, ns.Type); err != nil {
				setupFail("joining the caller's %s namespace: %v", nsName(ns.Type), err)
			}
		}
	}
	if spec.Root > 0 {
		// The caller's root, entered while root's (chroot needs
		// CAP_SYS_CHROOT); nothing is looked up in it before the
		// workload's uid is taken. The working directory is then the
		// new root until Dir is entered.
		if err := unix.Fchdir(spec.Root); err != nil {
			setupFail("the caller's root directory: fchdir: %v", err)
		}
		if err := unix.Chroot("."); err != nil {
			setupFail("the caller's root directory: chroot: %v", err)
		}
	}
	// A session keyring of the workload's own. The daemon's (systemd
	// gives a service a private one) would otherwise be every workload's:
	// whoever holds a keyring as its session keyring possesses it, so one
	// user's workload could read, plant or unlink another's keys, or the
	// daemon's. The new keyring is made while root's, so it draws on
	// root's key quota, not the user's (kernel.keys.maxkeys is 200 a
	// user: a user's 201st workload would be refused); the workload and
	// its descendants possess it, and no one else does.
	if err := joinNewSessionKeyring(); err != nil {
		setupFail("a session keyring of the workload's own: keyctl: %v", err)
	}
	resetInherited()
	if err := resetPersonality(); err != nil {
		setupFail("%v", err)
	}
	if c := spec.Cred; c != nil {
		// What a change of uid from 0 leaves of root's, for a workload
		// of another uid. One that stays uid 0 (root's caller, or root
		// naming only a gid) keeps root's capabilities, as root's own
		// setpriv --regid would.
		if c.UID != 0 {
			if err := dropInheritable(); err != nil {
				setupFail("clearing the inheritable capabilities: %v", err)
			}
			if err := clearSecurebits(); err != nil {
				setupFail("%v", err)
			}
		}
		// Groups first, then the gid, then the uid, each on every thread
		// (the syscall package's setters do that): with the uid gone the
		// others could not be changed.
		groups := make([]int, len(c.Groups))
		for i, g := range c.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			setupFail("setgroups: %v", err)
		}
		if err := syscall.Setresgid(int(c.GID), int(c.GID), int(c.GID)); err != nil {
			setupFail("setresgid %d: %v", c.GID, err)
		}
		if err := syscall.Setresuid(int(c.UID), int(c.UID), int(c.UID)); err != nil {
			setupFail("setresuid %d: %v", c.UID, err)
		}
		if c.UID != 0 {
			if err := dropCaps(); err != nil {
				setupFail("%v", err)
			}
		}
	}
	if spec.Dir != "" {
		if err := unix.Chdir(spec.Dir); err != nil {
			fail("working directory %s: %v", spec.Dir, err)
		}
	}
	if spec.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fail("no_new_privs: %v", err)
		}
	}
	if spec.Umask != nil {
		// Nothing is created between here and the exec. The umask lives
		// in this thread's filesystem context, which the exec keeps
		// (its own since the unshare above, when namespaces were joined).
		unix.Umask(int(*spec.Umask & 0o777))
	}
	path, err := resolve(spec.Argv[0], spec.Path)
	if err != nil {
		fail("%v", err)
	}
	if err := resetSignals(); err != nil {
		setupFail("%v", err)
	}
	if len(filters) > 0 {
		// The caller's filters, last: a filter is the caller's to write,
		// and one attached while this thread was root's could answer
		// for the calls that take root away (a filter returning 0 from
		// setresuid without running it left a user's job root's, with
		// every capability). Attached here, what it answers for is the
		// exec of a process already the user's alone. A process not
		// root's needs no_new_privs to attach one (it is then the
		// job's, and the claim says so); one that stays root's has
		// CAP_SYS_ADMIN. Other threads of this process are not
		// filtered; they end at the exec.
		if os.Geteuid() != 0 {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				setupFail("no_new_privs, for the caller's seccomp filters: %v", err)
			}
		}
		if err := seccomp.Install(filters); err != nil {
			// The caller's filters may refuse seccomp(2) itself.
			callerFail("the caller's seccomp filters: %v", err)
		}
	}
	err = unix.Exec(path, spec.Argv, spec.Env)
	fail("%s: %v", spec.Argv[0], err)
}

// alive reports whether the process fd (a pidfd) names has not exited.
func alive(fd int) bool { return pidfd.FdAlive(fd) }

// setLoginUID sets the calling thread's audit login uid to u.
func setLoginUID(u uint32) error {
	f, err := os.OpenFile("/proc/thread-self/loginuid", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatUint(uint64(u), 10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// joinNewSessionKeyring gives the calling thread a new, anonymous session
// keyring (keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)). Not
// unix.KeyctlJoinSessionKeyring: it passes a name even when given "", and
// a named join joins any keyring of that name the caller may search.
//
// A kernel without keys (ENOSYS) has no keyring to share. A refusal is a
// failure, unless this thread cannot reach its current session keyring
// either (keyctl blocked: a container runtime's seccomp profile refuses
// every keyctl call with EPERM), and the workload, under the same filter,
// could not reach it.
func joinNewSessionKeyring() error {
	_, _, join := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	var get syscall.Errno
	if join == unix.EPERM || join == unix.EACCES {
		spec := unix.KEY_SPEC_SESSION_KEYRING
		_, _, get = unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(spec), 0)
	}
	return keyringResult(join, get)
}

// keyringResult is joinNewSessionKeyring's verdict on its calls: the join's
// error, and when the join was refused, the error of reading the current
// session keyring's id.
func keyringResult(join, get syscall.Errno) error {
	switch {
	case join == 0, join == unix.ENOSYS:
		return nil
	case (join == unix.EPERM || join == unix.EACCES) && (get == unix.EPERM || get == unix.EACCES || get == unix.ENOSYS):
		return nil // keyctl is blocked for this process, and for the workload
	}
	return join
}

// nsName names a CLONE_NEW* namespace type.
func nsName(t int) string {
	switch t {
	case unix.CLONE_NEWNS:
		return "mount"
	case unix.CLONE_NEWNET:
		return "network"
	case unix.CLONE_NEWIPC:
		return "IPC"
	case unix.CLONE_NEWUTS:
		return "UTS"
	}
	return fmt.Sprintf("type %#x", t)
}

// nameShim names the process shimComm until the exec renames it, through
// /proc/self/comm, which names the thread group's leader (the name a
// zombie keeps in /proc/PID/stat), whichever thread writes it. Without
// /proc the shim keeps the name "exe" and BeforeExec cannot tell.
func nameShim() {
	fd, err := unix.Open("/proc/self/comm", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Write(fd, []byte(shimComm))
	unix.Close(fd)
}

// statusLast moves the status pipe (descriptor 4) above every descriptor
// this process holds and returns where it is. Exec closes descriptors in
// ascending order, and the daemon takes the status pipe's end for the end
// of the exec: the runtime keeps descriptors of its own above 4 (the
// cgroup's CPU quota files), which were still open in the workload for a
// moment after the daemon had returned it.
func statusLast() uintptr {
	hi := 4
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 4
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			hi = max(hi, n)
		}
	}
	fd, err := unix.FcntlInt(4, unix.F_DUPFD_CLOEXEC, hi+1)
	if err != nil {
		return 4
	}
	unix.Close(4)
	return uintptr(fd)
}

// resolve finds name on path with this process's own rights: a directory
// it cannot search yields nothing, as for a name that is nowhere.
func resolve(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", errors.New(name + ": not found in PATH")
}
