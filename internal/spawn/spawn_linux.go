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
	"unsafe"

	"golang.org/x/sys/unix"

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
	status := os.NewFile(statusLast(), "status")
	fail := func(format string, args ...any) {
		fmt.Fprintf(status, format, args...)
		os.Exit(127)
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

// The securebits (linux/securebits.h): four settings, each with a lock
// bit just above it that freezes its value.
const (
	secbitNoroot        = 1 << 0 // a setuid-root exec gets no capability
	secbitNoSetuidFixup = 1 << 2 // a change of uid from 0 keeps the capabilities
	secbitKeepCaps      = 1 << 4 // the permitted set survives the change (cleared at exec)
	secbitNoAmbient     = 1 << 6 // the ambient set cannot be raised
)

// unlockedSecurebits returns bits without the settings whose lock bit is
// not set: what may be cleared. A locked setting keeps its value, and so
// do the lock bits (the kernel refuses a write that changes either).
func unlockedSecurebits(bits int) int {
	out := bits
	for _, v := range []int{secbitNoroot, secbitNoSetuidFixup, secbitKeepCaps, secbitNoAmbient} {
		if bits&(v<<1) == 0 {
			out &^= v
		}
	}
	return out
}

// clearSecurebits clears the calling thread's securebits, which it has
// from the daemon's thread (a unit's SecureBits=, capsh --secbits), before
// the shim takes a user's uid. With SECBIT_NO_SETUID_FIXUP the change of
// uid kept every capability: the shim then entered the working directory,
// looked argv[0] up and exec'd with them (a job of a user ran a setuid
// program the user may not execute, and entered a directory it may not
// search), and the bit stayed for the job, so a setuid program of its
// that drops root kept root's capabilities. Changing securebits needs
// CAP_SETPCAP (the packaged unit has none), and a locked setting cannot
// change: a thread that cannot clear SECBIT_NO_SETUID_FIXUP fails the
// launch. The other settings only take from the job (SECBIT_NOROOT: a
// setuid-root program gets no capability); those that cannot be cleared
// stay.
func clearSecurebits() error {
	bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	want := unlockedSecurebits(bits)
	if want == bits {
		if bits&secbitNoSetuidFixup != 0 {
			return fmt.Errorf("the daemon runs with securebits %#x (no-setuid-fixup, locked): a job of another user would keep root's capabilities", bits)
		}
		return nil
	}
	err = unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(want), 0, 0, 0)
	switch {
	case err != nil && bits&secbitNoSetuidFixup != 0:
		return fmt.Errorf("the daemon runs with securebits %#x (no-setuid-fixup): a job of another user would keep root's capabilities, and they cannot be cleared: %w", bits, err)
	case err == nil && want&secbitNoSetuidFixup != 0:
		return fmt.Errorf("the daemon runs with securebits %#x (no-setuid-fixup, locked): a job of another user would keep root's capabilities", bits)
	}
	return nil
}

// dropCaps empties the calling thread's capability sets after it took a
// user's uid, and confirms they are empty: the change of uid clears them
// (clearSecurebits saw to that), and this holds should anything have
// kept them. Dropping capabilities needs none.
func dropCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping the capabilities: capset: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping the capabilities: capget: %w", err)
	}
	if data != [2]unix.CapUserData{} {
		return fmt.Errorf("capabilities left after the change of uid: %+v", data)
	}
	return nil
}

// defaultTimerSlack is the kernel's timer slack for a process not under a
// realtime policy (50 µs), which init has and passes on.
const defaultTimerSlack = 50000

// resetInherited gives the calling thread, and its process where the
// setting is the process's, the kernel's default for what a process has
// from its parent and keeps across exec, and which the daemon may have
// been started with: timer slack, transparent huge pages disabled, KSM
// merging, the time-stamp counter refused (x86), the machine-check kill
// policy and the memory policy (a daemon bound to a NUMA node bound every
// job to it). Each is the workload's to change again; a setting the kernel
// does not have (EINVAL) is left as it is. Called while root's, before the
// caller's seccomp filters, which may refuse some of these calls (a
// container's default profile refuses set_mempolicy).
func resetInherited() {
	unix.Prctl(unix.PR_SET_TIMERSLACK, defaultTimerSlack, 0, 0, 0)
	unix.Prctl(unix.PR_SET_THP_DISABLE, 0, 0, 0, 0)
	unix.Prctl(unix.PR_SET_MEMORY_MERGE, 0, 0, 0, 0)
	unix.Prctl(unix.PR_SET_TSC, unix.PR_TSC_ENABLE, 0, 0, 0)
	unix.Prctl(unix.PR_MCE_KILL, unix.PR_MCE_KILL_CLEAR, 0, 0, 0)
	unix.Syscall(unix.SYS_SET_MEMPOLICY, unix.MPOL_DEFAULT, 0, 0)
}

// resetPersonality gives the workload the kernel's default execution
// domain, PER_LINUX, in place of one it had from the daemon (a daemon
// started under setarch -R made every job, and its children, run without
// address-space randomisation). A caller's own personality is not
// carried: under the packaged unit's LockPersonality= no other may be
// set; setarch in the command sets one where it may. A unit that sets
// Personality= to another domain next to LockPersonality= (the kernel then
// refuses PER_LINUX) fails every launch, with this reason.
func resetPersonality() error {
	cur, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0) // a query
	if errno != 0 {
		return fmt.Errorf("personality: %w", errno)
	}
	if cur == 0 {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0, 0, 0); errno != 0 {
		return fmt.Errorf("personality %#x: resetting it: %w", cur, errno)
	}
	return nil
}

// sigIgn and sigDfl are the two handler values of a struct sigaction
// that exec keeps as they are.
const (
	sigDfl = 0
	sigIgn = 1
)

// sigaction is the kernel's struct sigaction on the 64-bit ABIs.
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// resetSignals empties the calling thread's signal mask and gives every
// ignored signal its default action. exec keeps both (a handled signal
// goes back to its default; an ignored or blocked one stays so): a daemon
// started with SIGPIPE, SIGALRM, SIGXCPU or SIGXFSZ blocked, or job
// control signals ignored, gave them to every job, whose alarm() then
// never fired and whose RLIMIT_CPU and RLIMIT_FSIZE signals never came.
// The Go runtime's handlers on this process are left alone: exec resets
// them. Called last before the exec, on the thread that execs.
func resetSignals() error {
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old sigaction
		if _, _, errno := unix.Syscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); errno != 0 {
			continue // a signal number this kernel does not have
		}
		if old.handler != sigIgn {
			continue
		}
		def := sigaction{handler: sigDfl}
		if _, _, errno := unix.Syscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&def)), 0, 8, 0, 0); errno != 0 {
			return fmt.Errorf("signal %d: sigaction: %w", sig, errno)
		}
	}
	var none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil); err != nil {
		return fmt.Errorf("signal mask: %w", err)
	}
	return nil
}

// alive reports whether the process pidfd names has not exited (a pidfd
// becomes readable when its process exits).
func alive(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

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

// dropInheritable empties the calling thread's inheritable and ambient
// capability sets, as it is about to take a user's uid and exec. A change
// of every uid from 0 clears the permitted, effective and ambient sets but
// keeps the inheritable one, which this thread has from the daemon's
// thread that forked it: a daemon started with an inheritable capability
// (capsh --inh, a container runtime that sets some) gave it to every
// user's workload, whose exec of a file with that capability in its
// inheritable set (setcap cap_net_raw+ei) then held it, where the user
// running the file itself got none. Capabilities are per thread: Main
// locks the one that execs.
func dropInheritable() error {
	// EINVAL: a kernel without ambient capabilities (before 4.3) has
	// none to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("ambient: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Inheritable == 0 && data[1].Inheritable == 0 {
		return nil
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// optional formats an optional value for a message.
func optional(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

// takeSched gives the calling thread the less favourable of its own
// scheduling (the daemon's thread's that forked it) and the caller's, and
// returns the nice value it ends with. The policy is ranked realtime
// (never kept: SCHED_OTHER replaces it), SCHED_OTHER, SCHED_BATCH,
// SCHED_IDLE, and a nil policy counts as SCHED_OTHER; the nice value is
// the higher of the two, nil counting as the thread's own. The time
// slice is the kernel's default (a runtime of 0). Linux schedules
// threads: sched_setattr of 0 sets the calling one's, the one that execs
// (Main locks it). Nothing here needs privilege: leaving a realtime
// policy, raising a nice value and entering SCHED_BATCH or SCHED_IDLE
// are open to any process, whatever its RLIMIT_NICE and RLIMIT_RTPRIO.
func takeSched(policy, nice *int) (int, error) {
	own, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, fmt.Errorf("sched_getattr: %w", err)
	}
	pol := unix.SCHED_NORMAL
	if policy != nil {
		pol = *policy
	}
	pol = lessFavouredPolicy(int(own.Policy), pol)
	n := int(own.Nice)
	if nice != nil && *nice > n {
		n = min(*nice, 19) // the kernel's highest
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: uint32(pol), Nice: int32(n)}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return 0, fmt.Errorf("sched_setattr: %w", err)
	}
	return n, nil
}

// policyRank orders the policies a workload may end with, from the most
// favoured; a realtime, deadline or unknown policy ranks as SCHED_OTHER,
// which replaces it.
func policyRank(p int) int {
	switch p {
	case unix.SCHED_BATCH:
		return 1
	case unix.SCHED_IDLE:
		return 2
	}
	return 0
}

// lessFavouredPolicy returns the less favoured of two policies
// (policyRank), SCHED_OTHER for a realtime, deadline or unknown one.
func lessFavouredPolicy(a, b int) int {
	switch max(policyRank(a), policyRank(b)) {
	case 1:
		return unix.SCHED_BATCH
	case 2:
		return unix.SCHED_IDLE
	}
	return unix.SCHED_NORMAL
}

// The I/O priority classes and the field layout of an ioprio value
// (linux/ioprio.h): the class in bits 13-15, the level in bits 0-2.
const (
	ioprioClassNone = 0
	ioprioClassRT   = 1
	ioprioClassBE   = 2
	ioprioClassIdle = 3
	ioprioWhoProc   = 1 // IOPRIO_WHO_PROCESS
)

// ioRank orders I/O priorities from the most favoured: the realtime class
// by level (0-7), the best-effort class by level (8-15), the idle class
// (16). The class none is best-effort at the level the kernel derives
// from the nice value n, (n+20)/5.
func ioRank(prio, n int) int {
	level := prio & 7
	switch prio >> 13 {
	case ioprioClassRT:
		return level
	case ioprioClassBE:
		return 8 + level
	case ioprioClassIdle:
		return 16
	}
	return 8 + (n+20)/5
}

// ioprioFor is the I/O priority a workload takes from its caller's
// (nil: none given), at nice value n, against own (the thread's from the
// daemon): the caller's where it ranks less favoured than own, with the
// realtime class, which the workload never gets, and any unknown class
// taken as the class none; own otherwise, unless own is realtime. It
// reports whether the thread's must change.
func ioprioFor(caller *int, own, n int) (int, bool) {
	c := 0 // the class none, level 0
	if caller != nil {
		switch *caller >> 13 {
		case ioprioClassBE, ioprioClassIdle:
			c = *caller & (7 | 7<<13)
		}
	}
	if ioRank(c, n) > ioRank(own, n) || own>>13 == ioprioClassRT || own>>13 > ioprioClassIdle {
		return c, c != own
	}
	return own, false
}

// takeIOPrio gives the calling thread the caller's I/O priority where it
// is less favoured than the thread's own (ioprioFor), n being the nice
// value the thread ends with. ioprio_set of process 0 sets the calling
// thread's; the best-effort and idle classes need no privilege.
func takeIOPrio(caller *int, n int) error {
	own, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProc, 0, 0)
	if errno == unix.ENOSYS {
		return nil // a kernel without a block layer has no I/O priorities
	}
	if errno != 0 {
		return fmt.Errorf("ioprio_get: %w", errno)
	}
	prio, change := ioprioFor(caller, int(own), n)
	if !change {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProc, 0, uintptr(prio)); errno != 0 {
		return fmt.Errorf("ioprio_set %#x: %w", prio, errno)
	}
	return nil
}

// takeOOMScoreAdj raises the process's oom_score_adj to the caller's, v,
// where v is higher than its own (the daemon's); raising it needs no
// privilege. Without CAP_SYS_RESOURCE the floor the process has from the
// daemon (oom_score_adj_min) stays, and the workload may come back down
// to it (see the package comment).
func takeOOMScoreAdj(v int) error {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return err
	}
	own, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("/proc/self/oom_score_adj: %w", err)
	}
	v = min(v, 1000)
	if v <= own {
		return nil
	}
	return os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0)
}

// takeAffinity gives the calling thread (the one that execs) the caller's
// CPU affinity mask. A mask none of whose CPUs the workload's cgroup
// allows is refused by the kernel (EINVAL), and the thread keeps the
// daemon's: affinity is a placement, not a privilege, and the caller's
// own fork into that cgroup would have had the same refusal.
func takeAffinity(mask []uint64) {
	var set unix.CPUSet
	for i, w := range mask {
		for b := range 64 {
			if w&(1<<b) != 0 {
				set.Set(i*64 + b) // a CPU past the set's size is left out
			}
		}
	}
	if set.Count() > 0 {
		_ = unix.SchedSetaffinity(0, &set) // refused: kept, above
	}
}

// AffinityMask returns set as a Spec.Affinity mask.
func AffinityMask(set *unix.CPUSet) []uint64 {
	var mask []uint64
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			for len(mask) <= cpu/64 {
				mask = append(mask, 0)
			}
			mask[cpu/64] |= 1 << (cpu % 64)
		}
	}
	return mask
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
