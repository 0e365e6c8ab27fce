package actions

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
)

// unownedUID is the real uid of a thread that signals for a user: one no
// process has (the kernel's (uid_t)-2, next to the invalid -1), so that
// its real uid grants nothing of its own in the kill rule.
const unownedUID = 0xFFFFFFFE

// onLoan, when set (tests), runs on the thread that signals for a user
// while it has that user's rights, with its thread id.
var onLoan func(tid int)

// signalAs sends sig to each of hs with uid's rights, not the caller's,
// from a thread of its own, so that the kernel applies its kill rule to
// uid at the moment of each signal: a process that changed its uids since
// it was checked (a setuid program it ran in the grace period) is refused
// with EPERM by the kernel itself, not by a read of /proc that came
// before. errs[i] is the error of hs[i].
//
// The thread takes uid as its effective uid only (setresuid on that thread
// alone): the kill rule lets a sender whose real or effective uid is the
// target's real or saved uid signal it, and a thread with uid as its real
// or saved uid could itself be signalled by uid, which stopped or killed
// the whole daemon (kill(2) takes a thread id too). Its real uid is
// unownedUID, matching no process, and its saved uid stays root's, which
// a sender's uids are never compared with; its effective capabilities go
// with its effective uid and come back with it. The thread is given back
// as root, or never given back (the runtime ends it with the goroutine) if
// that failed.
func signalAs(uid uint32, hs []*pidfd.Handle, sig unix.Signal) []error {
	errs := make([]error, len(hs))
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, unownedUID, uintptr(uid), ^uintptr(0)); e != 0 {
			for i := range errs {
				errs[i] = fmt.Errorf("taking uid %d's rights to signal: %w", uid, e)
			}
			runtime.UnlockOSThread() // nothing changed
			return
		}
		if onLoan != nil {
			onLoan(unix.Gettid())
		}
		for i, h := range hs {
			errs[i] = h.Signal(sig)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 0, 0, 0); e == 0 {
			runtime.UnlockOSThread()
		}
	}()
	<-done
	return errs
}
