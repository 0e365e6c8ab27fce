package tracepoint

// The compiler and flags are pinned so that scripts/bpf-check.sh can
// regenerate the committed output byte for byte (Debian clang 14).
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -tags linux -type event -type fork_event -type exec_event -type proc_ctx process ../../../bpf/process.bpf.c
