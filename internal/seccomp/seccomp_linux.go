package seccomp

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Filter is one classic BPF seccomp program.
type Filter []unix.SockFilter

// maxFilters bounds how many filters Read takes from one process (the
// kernel's own bound is on their instructions, 32,768 in all).
const maxFilters = 1024

// ErrUnreadable wraps every reason Read could not read a process's
// filters: the caller must refuse what they were to bound.
var ErrUnreadable = errors.New("cannot read the seccomp filters")

// stopTimeout bounds the wait for the process to stop for the read.
const stopTimeout = 2 * time.Second

// ptraceSeccompGetFilter is PTRACE_SECCOMP_GET_FILTER (linux/ptrace.h).
const ptraceSeccompGetFilter = 0x420c

// Read returns the seccomp filters of process pid's main thread, oldest
// first; none when it is not in seccomp's filter mode (nor in strict
// mode, which its caller must tell from /proc/PID/status). The calling
// thread becomes its tracer for the read: the caller locks it
// (runtime.LockOSThread). ours is asked once pid is seized, before it is
// stopped, whether pid is still the process meant (a pidfd of it not yet
// readable): a seize alone neither stops the process nor sends it
// anything, so a pid reissued to another process in between is let go
// untouched. A process that does not stop within stopTimeout (in
// uninterruptible sleep) fails the read and stays seized, its stop
// pending, until the calling thread ends: the caller ends it (the shim
// exits). Errors wrap ErrUnreadable.
func Read(pid int, ours func() bool) ([]Filter, error) {
	if err := unix.PtraceSeize(pid); err != nil {
		return nil, fmt.Errorf("%w: ptrace seize of process %d: %v", ErrUnreadable, pid, err)
	}
	sig := 0
	defer func() { detach(pid, sig) }()
	if !ours() {
		return nil, fmt.Errorf("%w: process %d is gone", ErrUnreadable, pid)
	}
	if err := unix.PtraceInterrupt(pid); err != nil {
		return nil, fmt.Errorf("%w: ptrace interrupt of process %d: %v", ErrUnreadable, pid, err)
	}
	// A thread in uninterruptible sleep (a vfork parent, a hung
	// filesystem) stops only when it wakes: the wait is bounded, and a
	// tracee left running is let go when the tracer exits. The look is
	// made less and less often (a stop comes within microseconds, or
	// late): at a fixed millisecond, root's shims spent a user's held
	// launches' 2 s each in wait4 calls, 90 ms of CPU apiece.
	var ws unix.WaitStatus
	pause := 100 * time.Microsecond
	for deadline := time.Now().Add(stopTimeout); ; {
		got, err := unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: waiting for process %d to stop: %v", ErrUnreadable, pid, err)
		}
		if got == pid {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: process %d did not stop within %v (uninterruptible sleep?)", ErrUnreadable, pid, stopTimeout)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	if !ws.Stopped() {
		return nil, fmt.Errorf("%w: process %d ended (%v)", ErrUnreadable, pid, ws)
	}
	if ws.TrapCause() != unix.PTRACE_EVENT_STOP {
		// A signal's delivery stop came first: the signal is handed
		// back at the detach.
		sig = int(ws.StopSignal())
	}
	var fs []Filter
	for i := 0; ; i++ {
		if i == maxFilters {
			return nil, fmt.Errorf("%w: process %d has over %d filters", ErrUnreadable, pid, maxFilters)
		}
		n, _, errno := unix.Syscall6(unix.SYS_PTRACE, ptraceSeccompGetFilter, uintptr(pid), uintptr(i), 0, 0, 0)
		if errno == unix.ENOENT || errno == unix.EINVAL && i == 0 {
			return fs, nil // past the last; or none: not in filter mode
		}
		if errno != 0 {
			return nil, fmt.Errorf("%w: filter %d of process %d: %v", ErrUnreadable, i, pid, errno)
		}
		f := make(Filter, n)
		if n > 0 {
			got, _, errno := unix.Syscall6(unix.SYS_PTRACE, ptraceSeccompGetFilter, uintptr(pid), uintptr(i), uintptr(unsafe.Pointer(&f[0])), 0, 0)
			if errno != 0 || got != n {
				return nil, fmt.Errorf("%w: filter %d of process %d: %v", ErrUnreadable, i, pid, errno)
			}
		}
		fs = append(fs, f)
	}
}

// detach lets process pid go, with signal sig (0: none) delivered.
func detach(pid, sig int) {
	unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(sig), 0, 0)
}

// Dedupe returns fs without the filters equal to an earlier one: the same
// filter twice decides as it does once (the kernel takes the strictest
// action of all), and a workload whose caller was itself a workload would
// otherwise carry one more copy of the daemon's own filter at each level.
func Dedupe(fs []Filter) []Filter {
	var out []Filter
	for _, f := range fs {
		if !slices.ContainsFunc(out, func(g Filter) bool { return slices.Equal(f, g) }) {
			out = append(out, f)
		}
	}
	return out
}

// Install attaches fs to the calling thread, in order. Without
// no_new_privs the thread needs CAP_SYS_ADMIN. The filters apply to this
// thread at once: what it does after must be allowed by them.
func Install(fs []Filter) error {
	for i, f := range fs {
		if len(f) == 0 {
			return fmt.Errorf("filter %d is empty", i)
		}
		prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
			return fmt.Errorf("attaching filter %d of %d (%d instructions): %w", i+1, len(fs), len(f), errno)
		}
	}
	return nil
}
