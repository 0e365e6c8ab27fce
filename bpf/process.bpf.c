//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * process.bpf.c: process lifecycle events for the supervisor.
 *
 * Three BTF-enabled tracepoints (tp_btf: no tracefs needed) write one
 * fixed-size record per process event into a ring buffer:
 *
 *   sched_process_fork  a new thread group (never a new thread)
 *   sched_process_exec  a process replaced its program (by tgid, even when a
 *                       non-leader thread called execve)
 *   sched_process_exit  the last thread of a thread group died
 *
 * Start times are task->start_boottime of the thread group leader converted
 * to clock ticks exactly as /proc/PID/stat field 22 does (nsec_to_clock_t
 * with USER_HZ = 100), and the pidfs inode id is struct pid's ino where the
 * kernel has pidfs, so a record's identity matches what user space derives
 * from /proc and a pidfd. Reservation failures are counted in the lost map.
 *
 * The record layout is mirrored in internal/events/tracepoint/decode.go.
 */

#include "process.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* NSEC_PER_SEC / USER_HZ: USER_HZ is 100 on every architecture Linux
 * exposes to user space through /proc. */
#define NSEC_PER_TICK 10000000ULL

enum event_kind {
	KIND_FORK = 1,
	KIND_EXEC = 2,
	KIND_EXIT = 3,
};

/* Flags. */
#define FLAG_PIDFS 1 /* ino and parent_ino are pidfs inode ids */

struct event {
	__u64 time_ns;            /* CLOCK_BOOTTIME of the event */
	__u64 start_ticks;        /* start of the process, clock ticks since boot */
	__u64 parent_start_ticks; /* start of the parent process */
	__u64 ino;                /* pidfs inode id of the process, 0 if none */
	__u64 parent_ino;         /* pidfs inode id of the parent, 0 if none */
	__u32 kind;               /* enum event_kind */
	__s32 pid;                /* thread group id */
	__s32 tid;                /* thread that caused the event */
	__s32 ppid;               /* parent thread group id */
	__u32 status;             /* exit: wait(2) status */
	__u32 flags;
	char comm[TASK_COMM_LEN];
};

#define FILENAME_LEN 256

/* An exec record when want_filename is set: the path given to execve
 * (bprm->filename), NUL-terminated, possibly truncated. */
struct exec_event {
	struct event ev;
	char filename[FILENAME_LEN];
};

/* Set by user space before loading. */
const volatile bool want_filename = 0;

/* Emits BTF for the record so bpf2go generates its Go twin (processEvent),
 * which a test checks against decode.go's layout. No program uses it, so
 * loading never creates its .bss map. */
const struct event *unused_event __attribute__((unused));
const struct exec_event *unused_exec_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline struct event *reserve_size(__u32 kind, __u64 size)
{
	struct event *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e) {
		count_lost();
		return 0;
	}
	e->time_ns = bpf_ktime_get_boot_ns();
	e->kind = kind;
	e->status = 0;
	e->flags = 0;
	return e;
}

static __always_inline struct event *reserve(__u32 kind)
{
	return reserve_size(kind, sizeof(struct event));
}

/* Waking the reader for every record costs more than the record (an
 * irq_work and a context switch per event under a fork storm). A record
 * wakes the reader only when none did for WAKEUP_GAP_NS, or when the ring is
 * a quarter full; the others are submitted silently. The reader keeps
 * polling with a deadline longer than WAKEUP_GAP_NS after every record it
 * sees, so a silent record is never stranded: it sleeps without a deadline
 * only after a quiet stretch longer than the gap, and the first record after
 * such a stretch always wakes it. Races between CPUs on last_wakeup_ns only
 * add wakeups. */
/* Flags of bpf_ringbuf_submit and bpf_ringbuf_query (uapi linux/bpf.h,
 * which this program does not include). */
enum {
	RB_NO_WAKEUP = 1,
	RB_FORCE_WAKEUP = 2,
	RB_AVAIL_DATA = 0,
};

#define WAKEUP_GAP_NS 5000000ULL
#define WAKEUP_BYTES (1 << 18)

__u64 last_wakeup_ns = 0;

static __always_inline void submit(struct event *e)
{
	__u64 now = e->time_ns;
	__u64 flags = RB_NO_WAKEUP;

	if (now - last_wakeup_ns > WAKEUP_GAP_NS ||
	    bpf_ringbuf_query(&events, RB_AVAIL_DATA) >= WAKEUP_BYTES) {
		last_wakeup_ns = now;
		flags = RB_FORCE_WAKEUP;
	}
	bpf_ringbuf_submit(e, flags);
}

/* pidfs_ino returns the pidfs inode id of the process led by leader: the
 * inode of its thread-group struct pid, which fstat of a pidfd reports. */
static __always_inline __u64 pidfs_ino(struct task_struct *leader)
{
	struct pid *p = BPF_CORE_READ(leader, thread_pid);

	if (!p)
		return 0;
	if (!bpf_core_field_exists(p->ino))
		return 0;
	return BPF_CORE_READ(p, ino);
}

static __always_inline __u64 start_ticks(struct task_struct *leader)
{
	return BPF_CORE_READ(leader, start_boottime) / NSEC_PER_TICK;
}

/* fill_ids fills the identity of the process led by leader and of the
 * process led by parent_leader. */
static __always_inline void fill_ids(struct event *e, struct task_struct *leader,
				     struct task_struct *parent_leader)
{
	e->pid = BPF_CORE_READ(leader, tgid);
	e->start_ticks = start_ticks(leader);
	e->ino = pidfs_ino(leader);
	e->ppid = BPF_CORE_READ(parent_leader, tgid);
	e->parent_start_ticks = start_ticks(parent_leader);
	e->parent_ino = pidfs_ino(parent_leader);
	if (bpf_core_field_exists(((struct pid *)0)->ino))
		e->flags |= FLAG_PIDFS;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	struct event *e;

	/* A new thread joins an existing group: not a process. */
	if (BPF_CORE_READ(child, pid) != BPF_CORE_READ(child, tgid))
		return 0;
	e = reserve(KIND_FORK);
	if (!e)
		return 0;
	/* The birth parent is the creator (current), not real_parent, which
	 * CLONE_PARENT may point elsewhere. */
	fill_ids(e, child, BPF_CORE_READ(parent, group_leader));
	e->tid = BPF_CORE_READ(child, pid);
	BPF_CORE_READ_INTO(&e->comm, child, comm);
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct event *e;

	if (want_filename)
		e = reserve_size(KIND_EXEC, sizeof(struct exec_event));
	else
		e = reserve(KIND_EXEC);
	if (!e)
		return 0;
	/* de_thread has run: p leads the group now, even if it was another
	 * thread (old_pid) that called execve. */
	fill_ids(e, p, BPF_CORE_READ(p, real_parent, group_leader));
	e->tid = old_pid;
	BPF_CORE_READ_INTO(&e->comm, p, comm);
	if (want_filename) {
		struct exec_event *x = (struct exec_event *)e;

		if (bpf_probe_read_kernel_str(x->filename, sizeof(x->filename),
					      BPF_CORE_READ(bprm, filename)) < 0)
			x->filename[0] = 0;
	}
	submit(e);
	return 0;
}

static __always_inline int report_exit(struct task_struct *p)
{
	struct task_struct *leader = BPF_CORE_READ(p, group_leader);
	struct signal_struct *sig = BPF_CORE_READ(p, signal);
	struct event *e = reserve(KIND_EXIT);

	if (!e)
		return 0;
	fill_ids(e, leader, BPF_CORE_READ(leader, real_parent, group_leader));
	e->tid = BPF_CORE_READ(p, pid);
	/* What wait(2) reports (wait_task_zombie): the group's code after a
	 * group exit, otherwise the leader's own code. */
	if (BPF_CORE_READ(sig, flags) & SIGNAL_GROUP_EXIT)
		e->status = BPF_CORE_READ(sig, group_exit_code);
	else
		e->status = BPF_CORE_READ(leader, exit_code);
	BPF_CORE_READ_INTO(&e->comm, leader, comm);
	submit(e);
	return 0;
}

/* Linux 6.16+ passes group_dead: do_exit's own atomic_dec_and_test of
 * signal->live, true for exactly one thread per group. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct *p, bool group_dead)
{
	if (!group_dead)
		return 0;
	return report_exit(p);
}

/* Before 6.16 the tracepoint has no group_dead; signal->live has already
 * been decremented, so 0 means this is the last thread. Two threads dying at
 * the same moment can both see 0: the user-space side documents the
 * possible duplicate. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit_live, struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	return report_exit(p);
}
