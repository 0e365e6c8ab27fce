package xnu

// libSystem without cgo, the way golang.org/x/sys/unix reaches it on
// darwin: each function is imported from /usr/lib/libSystem.B.dylib by
// //go:cgo_import_dynamic, an assembly trampoline (libsystem_darwin.s)
// jumps to it, and the runtime's syscall.syscall / syscall.syscall6 (which
// x/sys links to the same way) call the trampoline on the system stack
// with the C calling convention. proc_signal_with_audittoken is not
// imported: a binary that imports a missing symbol does not load at all
// below macOS 14.4. It is looked up with dlsym(RTLD_DEFAULT) at run time
// and called through the same syscall.syscall.

import (
	"syscall"
	"unsafe"
)

//go:linkname syscall_syscall syscall.syscall
func syscall_syscall(fn, a1, a2, a3 uintptr) (r1, r2 uintptr, err syscall.Errno)

//go:linkname syscall_syscall6 syscall.syscall6
func syscall_syscall6(fn, a1, a2, a3, a4, a5, a6 uintptr) (r1, r2 uintptr, err syscall.Errno)

var libc_proc_pidinfo_trampoline_addr uintptr

//go:cgo_import_dynamic libc_proc_pidinfo proc_pidinfo "/usr/lib/libSystem.B.dylib"

var libc_proc_listallpids_trampoline_addr uintptr

//go:cgo_import_dynamic libc_proc_listallpids proc_listallpids "/usr/lib/libSystem.B.dylib"

var libc_dlsym_trampoline_addr uintptr

//go:cgo_import_dynamic libc_dlsym dlsym "/usr/lib/libSystem.B.dylib"

// rtldDefault is RTLD_DEFAULT of <dlfcn.h> on macOS: ((void *) -2).
const rtldDefault = ^uintptr(1)

// procPidinfo calls int proc_pidinfo(int pid, int flavor, uint64_t arg,
// void *buffer, int buffersize). It returns the bytes written; 0 on
// failure (libproc then sets errno, which this call does not read: see
// System.Identity for how a failure is told apart).
func procPidinfo(pid int32, flavor int32, buf unsafe.Pointer, size int) int {
	r1, _, _ := syscall_syscall6(libc_proc_pidinfo_trampoline_addr, uintptr(pid), uintptr(flavor), 0,
		uintptr(buf), uintptr(size), 0)
	return int(int32(r1))
}

// procListallpids calls int proc_listallpids(void *buffer, int
// buffersize): the number of pids written, -1 with errno on failure; with
// a nil buffer, the number the kernel would write now.
func procListallpids(buf []int32) (int, error) {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	r1, _, errno := syscall_syscall(libc_proc_listallpids_trampoline_addr, uintptr(p), uintptr(len(buf)*4), 0)
	if n := int32(r1); n < 0 {
		return 0, errno
	}
	return int(int32(r1)), nil
}

// dlsym returns the address of the C symbol name, or 0.
func dlsym(name string) uintptr {
	b := append([]byte(name), 0)
	r1, _, _ := syscall_syscall(libc_dlsym_trampoline_addr, rtldDefault, uintptr(unsafe.Pointer(&b[0])), 0)
	return r1
}

// signalWithAuditToken calls int proc_signal_with_audittoken(audit_token_t
// *, int) at fn. It returns 0, or an errno: as its return value (the
// libproc wrapper's convention) or, for -1, from errno.
func signalWithAuditToken(fn uintptr, tok *AuditToken, sig int) syscall.Errno {
	r1, _, errno := syscall_syscall(fn, uintptr(unsafe.Pointer(tok)), uintptr(sig), 0)
	switch r := int32(r1); {
	case r == 0:
		return 0
	case r == -1 && errno != 0:
		return errno
	case r > 0:
		return syscall.Errno(r)
	}
	return syscall.EINVAL
}
