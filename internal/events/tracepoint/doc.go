// Package tracepoint is the eBPF event source: three BTF-enabled tracepoint
// programs (bpf/process.bpf.c, compiled by bpf2go into process_bpfel.o and
// embedded, so building needs no clang) on sched_process_fork,
// sched_process_exec and sched_process_exit write fixed-size records into a
// BPF ring buffer, and Source decodes them into events.Event without
// allocating.
//
// What the records carry, and why it can be trusted:
//
//   - Only processes: a fork that creates a thread is dropped in the kernel;
//     an exec from a non-leader thread is reported for the thread group id
//     (Event.Tid names the thread that called execve); the exit is reported
//     once, for the last thread of the group, with the status wait(2) would
//     give the parent.
//   - Fork names the birth parent (the process whose thread called fork),
//     not the current parent, so double-forked daemons keep their lineage.
//   - Tokens are built from task->start_boottime converted to clock ticks as
//     /proc/PID/stat field 22 does, and from the pidfs inode id of the
//     process (Linux 6.9+); they are equal to what pidfd.Open gives.
//   - With WithExecPath, fork and exec events carry the process context
//     read in the kernel (Event.Ctx: real, effective and saved uid and gid,
//     supplementary groups, audit loginuid and sessionid, session and
//     process group with their leaders' tokens, controlling tty, cgroup id,
//     the pid in its own pid namespace and that namespace's inode, the
//     inode of its mount namespace, in which its paths are); a fork
//     has what it inherited, an exec what the new program starts with. Exec
//     events then also carry argv as received (up to WithArgvMax bytes, 32
//     KiB by default; a cut argv is flagged with its real count and size),
//     the executable the kernel resolved, the working directory and the
//     cgroup path with its container id (internal/container; for a cgroup
//     nested past the walk's bound, from the top levels the program reads
//     beside the cut path). Exec records
//     are variable-length, assembled in a per-CPU scratch entry and sent with
//     bpf_ringbuf_output; only exec events allocate (their strings).
//     SetExecBlobs(false) switches the strings off while nothing shows
//     them (a flag the exec program reads through a shared mapping): exec
//     records then carry the context only, and the program skips the
//     walks and the argument copy, most of its time.
//   - Paths come from a bounded dentry walk in the program (bpf_d_path is
//     not allowed in tp_btf programs): at most 128 steps and 4 KiB per
//     path, crossing mounts up to the task's root, so a path is absolute as
//     the task sees it (inside a chroot or a container, from its root). A
//     path past the bound, or one the task's root does not lead to (a file
//     or directory beyond its chroot or in another mount namespace, or on a
//     detached mount: umount -l, open_tree), is flagged truncated and holds
//     its last components without a leading slash, never a wrong absolute
//     path; a program run from a memfd is its name, memfd:NAME, flagged
//     so too. A program or working directory whose name was unlinked
//     before the exec keeps the name it had, flagged deleted (ExeDeleted,
//     CwdDeleted); a memfd is not (see bpf/process.bpf.c).
//   - Records are submitted without waking the reader: a wake-up is a
//     self-IPI (a VM exit in a guest), which cost more than the record. The
//     reader polls every 200 ms while records come; after a quiet stretch it
//     sets reader_asleep (an array element shared through mmap), looks at
//     the ring once more, and only then sleeps; the first program to commit
//     a record after that sees the flag, clears it and wakes the reader. A
//     ring half full also wakes it. A record is thus read within about
//     200 ms, and never left unread while the reader sleeps. A caller that
//     must see every record committed so far (a request about to act on
//     the graph) takes the ring's producer position (Source.Barrier),
//     kicks the reader through an eventfd in its epoll set (Source.Kick)
//     and waits until the reader has handed out everything before that
//     position and been called again (Source.Reached). The reader
//     waits in the Go runtime's netpoller (a private epoll set holding
//     the ring's file descriptor and a timerfd for the poll, so the
//     poll is no Go runtime timer, whose every expiry also woke the
//     runtime's sysmon thread), so no thread blocks in epoll_wait, and
//     reads the ring, and the lost counter, through their memory mappings
//     (mmapRing): records are decoded where they lie, and reading makes no
//     system call at all. Each system call after an idle moment wakes the
//     Go runtime's sysmon thread to its 20 µs tick for a millisecond or
//     more; under a storm one per drain cost more than the reading.
//   - WithExecPath needs Linux 6.4+ (open-coded iterators and
//     bpf_rdonly_cast); before it New fails to load the programs
//     (events.ErrUnavailable) and callers fall back to another mechanism.
//
// Limits:
//
//   - Needs kernel BTF (/sys/kernel/btf/vmlinux), BPF ring buffers and
//     tp_btf programs (Linux 5.8+), CAP_BPF and CAP_PERFMON (or
//     CAP_SYS_ADMIN), and the initial pid namespace, because the kernel
//     reports pids as the initial namespace sees them. New reports each
//     missing piece as an error wrapping events.ErrUnavailable.
//   - Before Linux 6.16 the exit tracepoint does not say whether the group
//     died; the program then reads signal->live, and two threads of one
//     process dying at the same instant can both report the exit.
//   - When the ring buffer is full, records are dropped and counted; Read
//     delivers an events.Lost event with the count once it has drained what
//     was buffered, and the consumer must resync from /proc.
//   - Start ticks assume USER_HZ = 100, true on every Linux architecture
//     that exposes clock ticks through /proc.
//   - Records are decoded as little-endian: the package is built only for
//     little-endian Linux; elsewhere New returns events.ErrUnavailable.
package tracepoint
