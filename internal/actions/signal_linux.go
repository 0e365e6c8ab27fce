package actions

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
)

// signalAs sends sig to each of hs with uid's rights, not the caller's:
// from a thread of its own whose real, effective and saved uids are set to
// uid (setresuid on that thread alone, which drops its capabilities), so
// the kernel applies its kill rule to uid at the moment of each signal. A
// process that changed its uids since it was checked (a setuid program it
// ran in the grace period) is refused with EPERM by the kernel itself,
// not by a read of /proc that came before. The thread is never given
// back: the goroutine ends locked to it, and the runtime ends it with the
// goroutine. errs[i] is the error of hs[i].
func signalAs(uid uint32, hs []*pidfd.Handle, sig unix.Signal) []error {
	errs := make([]error, len(hs))
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			for i := range errs {
				errs[i] = fmt.Errorf("taking uid %d's rights to signal: %w", uid, e)
			}
			return
		}
		for i, h := range hs {
			errs[i] = h.Signal(sig)
		}
	}()
	<-done
	return errs
}
