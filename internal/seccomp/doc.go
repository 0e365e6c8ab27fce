// Package seccomp copies a process's seccomp filters to the calling
// thread, so that a workload the daemon starts for a caller runs under
// the filters its caller runs under.
//
// The mechanism: no file shows a process's filters, and the kernel hands
// them out only to a tracer holding the process in a ptrace stop, with
// CAP_SYS_ADMIN (PTRACE_SECCOMP_GET_FILTER, CONFIG_CHECKPOINT_RESTORE).
// Read seizes the process's main thread (PTRACE_SEIZE, so nothing is
// sent to it), interrupts it, reads each filter in the order it was
// attached, oldest first, and detaches, handing back any signal the stop
// held; the thread goes on where it was. A system call it was blocked in
// is restarted, except those the kernel never restarts after a stop
// (epoll_wait, sigtimedwait, semtimedop, a read with SO_RCVTIMEO), which
// fail with EINTR, as under a debugger's attach. Install attaches them, in
// that order, to the calling thread, which keeps them across exec. A
// filter is its process's to write: its caller must attach them only
// where no answer of theirs can matter to anyone but that process's user
// (the shim: once it is the user's alone, just before the exec).
//
// Limits: the filters read are the main thread's (a process's threads may
// have different ones; sandboxes attach theirs to every thread). A process
// that another tracer holds (a debugger, strace) cannot be read, nor one
// under Yama's ptrace_scope 3, nor on a kernel without
// CONFIG_CHECKPOINT_RESTORE: the caller of Read must then refuse what the
// filters were to bound. The flags a filter was attached with
// (SECCOMP_FILTER_FLAG_LOG) are not copied: they change what is logged,
// not what is allowed. A filter that hands decisions to a listener
// (SECCOMP_RET_USER_NOTIF) is copied without the listener, and the
// kernel then refuses those calls (ENOSYS): stricter, never looser. The
// tracer's process gets a SIGCHLD for the stop and must not have another
// waiter that reaps or miscounts it: the daemon reads from its spawn
// shim, a process of its own.
package seccomp
