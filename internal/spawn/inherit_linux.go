package spawn

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds what the shim undoes of the daemon's before the exec:
// what a change of uid or an exec would let a workload keep
// (capabilities, securebits, signal dispositions and mask, personality,
// and the settings a process inherits and exec keeps).

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
