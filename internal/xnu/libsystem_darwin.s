// Trampolines to the libSystem functions imported in libsystem_darwin.go,
// in the form golang.org/x/sys/unix uses (zsyscall_darwin_*.s): a JMP to
// the dynamic symbol, and its address in a read-only variable. JMP
// assembles on amd64 and arm64 alike.

#include "textflag.h"

TEXT libc_proc_pidinfo_trampoline<>(SB),NOSPLIT,$0-0
	JMP	libc_proc_pidinfo(SB)
GLOBL	·libc_proc_pidinfo_trampoline_addr(SB), RODATA, $8
DATA	·libc_proc_pidinfo_trampoline_addr(SB)/8, $libc_proc_pidinfo_trampoline<>(SB)

TEXT libc_proc_listallpids_trampoline<>(SB),NOSPLIT,$0-0
	JMP	libc_proc_listallpids(SB)
GLOBL	·libc_proc_listallpids_trampoline_addr(SB), RODATA, $8
DATA	·libc_proc_listallpids_trampoline_addr(SB)/8, $libc_proc_listallpids_trampoline<>(SB)

TEXT libc_dlsym_trampoline<>(SB),NOSPLIT,$0-0
	JMP	libc_dlsym(SB)
GLOBL	·libc_dlsym_trampoline_addr(SB), RODATA, $8
DATA	·libc_dlsym_trampoline_addr(SB)/8, $libc_dlsym_trampoline<>(SB)
