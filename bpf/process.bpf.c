//go:build ignore

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * process.bpf.c: process lifecycle events for the supervisor.
 *
 * Three BTF-enabled tracepoints (tp_btf: no tracefs needed) write one
 * record per process event into a ring buffer (fork and exit fixed-size, exec
 * variable-length when the context is wanted):
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
 * With want_context set (user space's WithExecPath), fork and exec records
 * also carry the process context (struct proc_ctx: real, effective and saved
 * uid and gid, up to NGROUPS_CAP supplementary groups, audit loginuid and
 * sessionid, session and process group ids with their leaders' tokens, the
 * controlling tty, the cgroup id, the pid in its own pid namespace and that
 * namespace's inode, and the inode of its mount namespace, in which the
 * record's paths are: a private one, which any user can make in a user
 * namespace of its own, may bind any file on any name). A fork record
 * reads it from the child, which the kernel made a copy of the parent's;
 * an exec record reads it after the new credentials are committed. An exec record then carries, after its fixed
 * part, four variable blobs assembled in a per-CPU scratch buffer and sent
 * with bpf_ringbuf_output (a failed output is a counted loss):
 *
 *   exe     bprm->file's path: the file the kernel resolved and runs (./x,
 *           symlinks, fexecve and #! interpreters all end at the real file)
 *   cwd     fs->pwd
 *   cgroup  the cgroup2 (default hierarchy) path of the process
 *   cgtop   when the cgroup path was cut: the names of its CGROUP_TOP
 *           levels nearest the root (where container runtimes put their
 *           scopes), so nesting cgroups past the bound hides no container
 *   args    mm->arg_start..arg_end as the process received them, at most
 *           argv_max bytes; argc and the original size are always sent
 *
 * unless user space said it reads none (skip_blobs, set at run time): the
 * record is then its fixed part and context, flagged X_SKIPPED, and the
 * walks and the argument copy, most of an exec's probe time, are not done.
 *
 * bpf_d_path is not allowed in tp_btf programs, so paths are resolved by a
 * bounded walk in the program: dentry by dentry up d_parent, crossing from a
 * mount's root to its mountpoint in the parent mount, until the task's root
 * (fs->root): paths are absolute as the task sees them (inside a chroot or
 * a container, from its root). Each path blob holds the names leaf first,
 * each NUL-terminated (a directory entry's name cannot contain '/' or NUL);
 * user space reverses them. A walk that hits PATH_DEPTH steps (components
 * and mount crossings) or PATH_BYTES bytes, meets a dentry that is its own
 * parent without being a mount root (a disconnected dentry: a memfd's path
 * is then its name, memfd:NAME, which may hold '/'), or reaches the top of
 * a mount tree without meeting the task's root (a file or directory beyond
 * its chroot or in another mount namespace, or on a detached mount:
 * umount -l, open_tree), stops and sets the path's truncated flag: a path
 * is either whole or marked, never wrong. An executable or working
 * directory whose name was unlinked since it was opened (fexecve of a
 * deleted file, a removed directory; d_path's " (deleted)": the leaf
 * dentry unhashed, d_hash.pprev NULL, and not its own parent, which a
 * memfd is) keeps its last name, which another file may hold now: the
 * record flags it, X_EXE_DELETED or X_CWD_DELETED, and the path stays
 * the names the walk met. The cgroup path walks kernfs parents the same
 * way (CGROUP_DEPTH); past that bound, the top levels are read through
 * cgroup->ancestors[].
 *
 * Cost: task, cred, pid, mount, dentry and kernfs fields are read by direct
 * loads through BTF pointers (the verifier makes them fault-safe), not a
 * helper call each; an address computed from one (container_of, an element
 * of a flexible array) is turned back into a BTF pointer with
 * bpf_rdonly_cast. Helpers remain only for copies: names, argv, the
 * supplementary groups, the fd array. The walks loop on open-coded
 * iterators (bpf_iter_num), which the verifier checks by convergence instead
 * of unrolling every path length. Both need Linux 6.4+; the context-less
 * programs (fork, exec and exit with want_context unset) need only tp_btf
 * and ring buffers. Records are submitted without waking the reader (see
 * wake_reader): a wake-up is a self-IPI, by far the largest cost of a record
 * in a virtual machine.
 *
 * Where an exec's time goes, measured on Linux 6.18 in a 2-core PVM guest
 * (kernel BPF statistics, a storm of one worker, each part left out in
 * turn, medians of 3): 3.4 us per exec, of which the context 0.4, the
 * three walks 0.4, the argument copy 0.2 and the clock read 0.35 (kvm-clock
 * without a stable TSC: every read takes pvclock's shared last_value line);
 * the record's output into the shared ring 1.3 (bpf_ringbuf_output: the
 * ring's lock, taken with interrupts off, and the copy into lines last
 * touched a lap ago); about 0.7 remain for the dispatch, the ids and the
 * scratch entry. With two workers
 * exec'ing at once the same program takes 5-6 us: the ring's lock and
 * lines and that clock line pass from CPU to CPU. An empty tp_btf program
 * on sched_process_exit runs 0.15-0.18 us on that host.
 *
 * Not cached: the paths are walked at every exec. A cache keyed by dentry
 * could only be proved current with the rename and mount sequence counts
 * (rename_lock, mount_lock), which tp_btf programs cannot read (they are
 * in neither BTF nor, without CONFIG_KALLSYMS_ALL, kallsyms); a dentry's
 * address can be reused, and an ancestor renamed, without the leaf
 * changing.
 *
 * Why the scratch buffer and bpf_ringbuf_output, which copy an exec record
 * twice: bpf_ringbuf_reserve needs a constant size and the paths' lengths
 * are known only once walked. Measured on Linux 6.18 in a 2-core VM with
 * the kernel's BPF statistics and an instrumented copy of this program
 * (bpf_ktime_get_ns sections), an exec storm with 4 KiB of arguments
 * spends about 0.5 us more than one with a few in the final copy into the
 * ring (the ring's lines are cold: the reader last read them on another
 * CPU), 0.1 us more in reading the arguments, and nothing more elsewhere.
 * Reserving a ring buffer dynptr at the exact size and reading the
 * arguments straight into it (bpf_probe_read_user_dynptr, 6.16+), which
 * saves the copy into the scratch buffer, was 0.1-0.15 us slower per exec,
 * few arguments or 4 KiB: the dynptr calls cost more than the copy of hot
 * memory they save. Size classes of constant-size reservations would pad
 * every record and could save at most that hot copy.
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

/* Flags of struct proc_ctx. */
#define CTX_TTY 1          /* tty_major and tty_minor name the controlling tty */
#define CTX_AUDIT 2        /* loginuid and audit_session are set (CONFIG_AUDIT) */
#define CTX_SID_LEADER 4   /* the session leader is alive: its token is set */
#define CTX_PGID_LEADER 8  /* the group leader is alive: its token is set */
#define CTX_STD_TTY 16     /* stdin and stderr are the controlling tty */

#define NGROUPS_CAP 16

/* struct proc_ctx: who and where a process is, read in the kernel. Pids are
 * as the initial pid namespace sees them, except ns_pid. */
struct proc_ctx {
	__u64 cgroup_id;        /* cgroup2 id (the kernfs node id) */
	__u64 sid_start_ticks;  /* session leader's start, if CTX_SID_LEADER */
	__u64 sid_ino;          /* session leader's pidfs inode id */
	__u64 pgid_start_ticks; /* group leader's start, if CTX_PGID_LEADER */
	__u64 pgid_ino;
	__u32 uid, euid, suid;
	__u32 gid, egid, sgid;
	__u32 loginuid;         /* audit login uid, (u32)-1 when unset */
	__u32 audit_session;    /* audit session id, (u32)-1 when unset */
	__s32 sid;
	__s32 pgid;
	__s32 ns_pid;           /* pid in the process's own pid namespace */
	__u32 pidns_ino;        /* that namespace's inode number */
	__u32 mntns_ino;        /* the mount namespace's inode number */
	__u32 tty_major;
	__u32 tty_minor;
	__u32 ngroups;          /* supplementary groups in all */
	__u32 flags;            /* CTX_* */
	__u32 groups[NGROUPS_CAP];
	__u32 pad;              /* 0: the size stays a multiple of 8 */
};

struct fork_event {
	struct event ev;
	struct proc_ctx ctx;
};

/* Flags of struct exec_event. */
#define X_ARGS_TRUNC 1   /* args holds argv_max of args_size bytes */
#define X_EXE_TRUNC 2    /* the walk stopped early: exe is a suffix */
#define X_CWD_TRUNC 4
#define X_CGROUP_TRUNC 8
#define X_ARGS_FAULT 16  /* the argument pages could not be read */
#define X_NO_EXE 32      /* bprm->file had no path */
#define X_SKIPPED 64     /* no blobs: user space reads none (skip_blobs) */
#define X_EXE_DELETED 128 /* the executable's name was unlinked (d_unlinked) */
#define X_CWD_DELETED 256 /* the working directory was removed */

struct exec_event {
	struct event ev;
	struct proc_ctx ctx;
	__u32 argc;          /* arguments received (bprm->argc) */
	__u32 args_size;     /* bytes received, NULs included */
	__u32 args_len;      /* bytes sent */
	__u32 xflags;        /* X_* */
	__u16 exe_len;       /* bytes of each blob, in this order after the */
	__u16 cwd_len;       /* fixed part: exe, cwd, cgroup, then args */
	__u16 cgroup_len;
	__u16 cgtop_len;     /* then cgtop, before args */
};

/* Walk bounds (see the comment at the top). */
#define PATH_BYTES 4096
#define NAME_BUF 256
#define PATH_DEPTH 128
#define CGROUP_DEPTH 32
#define CGROUP_TOP 8
/* The path blobs (exe, cwd, cgroup, cgtop: at most 3 * PATH_BYTES +
 * CGROUP_TOP * NAME_BUF) start within AREA bytes of the blob area. */
#define AREA 16384
#define AREA_MASK (AREA - 1)

/* Set by user space before loading. */
const volatile bool want_context = 0;
/* The most argument bytes an exec record carries. The scratch map's value
 * size is sizeof(struct scratch) + AREA + argv_max, set by user space to
 * match; the verifier knows argv_max as a constant. */
const volatile __u32 argv_max = 32768;


/* Emits BTF for the records so bpf2go generates their Go twins, which a
 * test checks against decode.go's layout. No program uses them, so loading
 * never creates its .bss map. */
const struct event *unused_event __attribute__((unused));
const struct fork_event *unused_fork_event __attribute__((unused));
const struct exec_event *unused_exec_event __attribute__((unused));

/* One entry of the scratch map: the walk's cursor, then the record being
 * assembled. The cursor lives in map memory on purpose: the verifier does
 * not track values there, so the walk loops do not fork its state on every
 * possible length (a cursor in a register made it explore each path length
 * apart and give up after a million instructions); each use is bounds-checked
 * instead. */
struct scratch {
	__u32 pos; /* next free byte of the blob area */
	__u32 end; /* end of the current path's blob */
	struct exec_event x;
	/* the blob area follows: AREA bytes for the paths, then argv_max */
};

/* Assembly buffer of exec records, one entry per possible CPU (user space
 * sets max_entries and value_size): a per-CPU array would cap the value at
 * 32 KiB. Programs on one CPU never overlap (tracepoints run with preemption
 * disabled, and a program does not recurse into itself). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct scratch) + AREA + 32768);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_MMAPABLE);
} lost SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* reserve_size reserves a record of size bytes stamped now (CLOCK_BOOTTIME
 * ns). */
static __always_inline struct event *reserve_size(__u32 kind, __u64 size, __u64 now)
{
	struct event *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e) {
		count_lost();
		return 0;
	}
	e->time_ns = now;
	e->kind = kind;
	e->status = 0;
	e->flags = 0;
	return e;
}

/* reserve reserves a fixed-size record stamped with the time of the call. */
static __always_inline struct event *reserve(__u32 kind)
{
	return reserve_size(kind, sizeof(struct event), bpf_ktime_get_boot_ns());
}

/* Waking the reader costs more than the record: bpf_ringbuf's wake-up is an
 * irq_work, raised by a self-IPI, which in a virtual machine is a VM exit
 * (tens of microseconds on this project's VMs, the largest part of an
 * exec's probe time when it woke the reader every 5 ms). So records are
 * submitted without waking, and the reader is woken only when it sleeps
 * without a deadline, which it says in reader_asleep (an array memory-mapped
 * by user space), or when the ring is half full (wakeup_bytes).
 *
 * The reader stores 1 in reader_asleep, then looks at the ring, then
 * sleeps; the program commits its record, then loads reader_asleep: both
 * sides put a full barrier between their store and their load (a sequentially
 * consistent atomic store in Go; the xchg that commits a ring buffer record
 * here), so either the reader sees the record or the program sees the flag
 * and wakes it: a record is never stranded. The program that sees the flag
 * clears it with an atomic exchange, so one wake-up answers it. While the
 * reader is awake it polls with a deadline (straggleWait in
 * source_linux.go) and finds the records submitted silently. */
enum {
	RB_NO_WAKEUP = 1,
	RB_FORCE_WAKEUP = 2,
	RB_AVAIL_DATA = 0,
};

/* A reader that polls is woken early when wakeup_bytes are waiting, at
 * most once per WAKEUP_FULL_GAP_NS. User space sets it to half the ring
 * (1 MiB, 4 MiB with context). Not a quarter, as it was: the reader polled
 * every 10 ms, and an exec storm with 4 KiB of arguments on a 2-core VM
 * (about 7,000 execs/s, 32 MB/s) filled a quarter of the 1 MiB ring in
 * 8 ms, so the program raised a wake-up every 80 or so execs, about 20 us
 * each (a self-IPI, a VM exit): 0.25 us per exec by the kernel's BPF
 * statistics, for a reader about to look anyway. It polls every 50 ms
 * now, before such a storm fills half of 4 MiB (contextRingMin). */
const volatile __u32 wakeup_bytes = 1 << 19;
#define WAKEUP_FULL_GAP_NS 1000000ULL

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(map_flags, BPF_F_MMAPABLE);
} reader_asleep SEC(".maps");

__u64 last_full_wakeup_ns = 0;

/* skip_blobs: 1 while nothing in user space shows what an exec captured
 * (no log lines of forks or execs, no subscriber to the event stream), set
 * by user space through its mapping (Source.SetExecBlobs). An exec record
 * then carries its fixed part and context but no blobs: the paths are not
 * walked and the arguments not read, which is most of an exec's probe
 * time. 0, the default, captures them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(map_flags, BPF_F_MMAPABLE);
} skip_blobs SEC(".maps");

/* wake_reader wakes the reader if it sleeps without a deadline, or if the
 * ring is filling up; called after a record was committed. The wake-up is a
 * discarded 8-byte record submitted with BPF_RB_FORCE_WAKEUP (no helper
 * wakes a ring buffer's reader alone). */
static __always_inline void wake_reader(__u64 now)
{
	__u32 key = 0;
	__u32 *asleep = bpf_map_lookup_elem(&reader_asleep, &key);
	void *r;

	if (asleep && *asleep) {
		if (!__sync_lock_test_and_set(asleep, 0))
			return; /* another CPU took it */
	} else if (bpf_ringbuf_query(&events, RB_AVAIL_DATA) >= wakeup_bytes &&
		   now - last_full_wakeup_ns > WAKEUP_FULL_GAP_NS) {
		last_full_wakeup_ns = now;
	} else {
		return;
	}
	r = bpf_ringbuf_reserve(&events, 8, 0);
	if (r)
		bpf_ringbuf_discard(r, RB_FORCE_WAKEUP);
}

static __always_inline void submit(struct event *e)
{
	__u64 now = e->time_ns;

	bpf_ringbuf_submit(e, RB_NO_WAKEUP);
	wake_reader(now);
}

/* pidfs_ino returns the pidfs inode id of the process led by leader: the
 * inode of its thread-group struct pid, which fstat of a pidfd reports. */
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id) __ksym;

/* Tasks are BTF pointers (tracepoint arguments and what they point to), so
 * their fields are read by direct loads, which the verifier turns into
 * fault-safe loads: far cheaper than a helper call per field. */
static __always_inline __u64 pidfs_ino(struct task_struct *leader)
{
	struct pid *p = leader->thread_pid;

	if (!p)
		return 0;
	if (!bpf_core_field_exists(p->ino))
		return 0;
	return p->ino;
}

/* copy_comm copies t's 16-byte name with two direct loads (the verifier
 * checks them against the BTF of task_struct) instead of a helper call. */
static __always_inline void copy_comm(char dst[16], struct task_struct *t)
{
	const __u64 *src = (const __u64 *)t->comm;

	((__u64 *)dst)[0] = src[0];
	((__u64 *)dst)[1] = src[1];
}

static __always_inline __u64 start_ticks(struct task_struct *leader)
{
	return leader->start_boottime / NSEC_PER_TICK;
}

/* fill_ids fills the identity of the process led by leader and of the
 * process led by parent_leader. */
static __always_inline void fill_ids(struct event *e, struct task_struct *leader,
				     struct task_struct *parent_leader)
{
	e->pid = leader->tgid;
	e->start_ticks = start_ticks(leader);
	e->ino = pidfs_ino(leader);
	e->ppid = parent_leader->tgid;
	e->parent_start_ticks = start_ticks(parent_leader);
	e->parent_ino = pidfs_ino(parent_leader);
	if (bpf_core_field_exists(((struct pid *)0)->ino))
		e->flags |= FLAG_PIDFS;
}

/* leader_token fills the token of the task that leads pid p (a session or
 * process group id), and returns 0 when no task has that pid any more. */
static __always_inline int leader_token(struct pid *p, __u64 *ticks, __u64 *ino)
{
	struct hlist_node *first;
	struct task_struct *t;

	if (!p)
		return 0;
	first = p->tasks[PIDTYPE_PID].first;
	if (!first)
		return 0;
	/* container_of: the offset makes a pointer the verifier cannot follow,
	 * so the result is cast back to a BTF pointer of the task. */
	t = bpf_rdonly_cast((void *)first - bpf_core_field_offset(struct task_struct, pid_links),
			    bpf_core_type_id_kernel(struct task_struct));
	*ticks = start_ticks(t);
	*ino = bpf_core_field_exists(p->ino) ? p->ino : 0;
	return 1;
}

static __always_inline int pid_nr(struct pid *p)
{
	return p ? p->numbers[0].nr : 0;
}

/* std_tty reports whether fds 0 and 2 of t are the terminal dev (the
 * kernel's internal encoding, major << 20 | minor): what ECS calls an
 * interactive process. */
static __always_inline int std_tty(struct task_struct *t, __u32 dev)
{
	struct fdtable *fdt = t->files->fdt;
	struct file *fds[3];
	int i;

	if (!fdt || fdt->max_fds < 3)
		return 0;
	if (bpf_probe_read_kernel(fds, sizeof(fds), fdt->fd) < 0)
		return 0;
	for (i = 0; i < 3; i += 2) {
		struct file *f = bpf_rdonly_cast(fds[i], bpf_core_type_id_kernel(struct file));

		if (!f || f->f_inode->i_rdev != dev)
			return 0;
	}
	return 1;
}

/* fill_ctx reads the context of task t (see struct proc_ctx). t is a
 * tracepoint argument, a BTF pointer: fields are read by direct loads,
 * which the verifier turns into faulting-safe loads, far cheaper than a
 * helper call each. A pointer that needs arithmetic (a container_of, an
 * element of a flexible array) is cast back to a BTF pointer with
 * bpf_rdonly_cast; only copies of arrays use helpers. */
static __always_inline void fill_ctx(struct proc_ctx *c, struct task_struct *t)
{
	const struct cred *cred = t->real_cred;
	struct signal_struct *sig = t->signal;
	struct tty_struct *tty = sig->tty;
	struct group_info *gi = cred->group_info;
	struct pid *sp = sig->pids[PIDTYPE_SID];
	struct pid *gp = sig->pids[PIDTYPE_PGID];
	struct pid *tp = t->thread_pid;
	struct upid *up;
	__u32 level, n;

	c->flags = 0;
	c->uid = cred->uid.val;
	c->euid = cred->euid.val;
	c->suid = cred->suid.val;
	c->gid = cred->gid.val;
	c->egid = cred->egid.val;
	c->sgid = cred->sgid.val;
	c->ngroups = gi ? gi->ngroups : 0;
	n = c->ngroups;
	if (n > NGROUPS_CAP)
		n = NGROUPS_CAP;
	if (n > 0 && bpf_probe_read_kernel(c->groups, n * sizeof(__u32), &gi->gid[0]) < 0)
		c->ngroups = 0;
	if (bpf_core_field_exists(t->loginuid)) {
		c->loginuid = t->loginuid.val;
		c->audit_session = t->sessionid;
		c->flags |= CTX_AUDIT;
	} else {
		c->loginuid = (__u32)-1;
		c->audit_session = (__u32)-1;
	}
	c->sid = pid_nr(sp);
	c->pgid = pid_nr(gp);
	c->sid_start_ticks = c->sid_ino = 0;
	c->pgid_start_ticks = c->pgid_ino = 0;
	if (leader_token(sp, &c->sid_start_ticks, &c->sid_ino))
		c->flags |= CTX_SID_LEADER;
	if (leader_token(gp, &c->pgid_start_ticks, &c->pgid_ino))
		c->flags |= CTX_PGID_LEADER;
	c->tty_major = c->tty_minor = 0;
	if (tty) {
		struct tty_driver *drv = tty->driver;

		c->tty_major = drv->major;
		c->tty_minor = drv->minor_start + tty->index;
		c->flags |= CTX_TTY;
		if (std_tty(t, c->tty_major << 20 | c->tty_minor))
			c->flags |= CTX_STD_TTY;
	}
	/* numbers[level]: the pid in the task's own namespace. Levels run
	 * from 0 to MAX_PID_NS_LEVEL, 33 of them: a mask of 31 would read a
	 * task 32 namespaces deep as one of the initial namespace. */
	level = tp->level;
	if (level <= MAX_PID_NS_LEVEL) {
		up = bpf_rdonly_cast((void *)tp + bpf_core_field_offset(struct pid, numbers) +
				     level * bpf_core_type_size(struct upid),
				     bpf_core_type_id_kernel(struct upid));
		c->ns_pid = up->nr;
		c->pidns_ino = up->ns->ns.inum;
	} else {
		c->ns_pid = 0;
		c->pidns_ino = 0;
	}
	c->cgroup_id = t->cgroups->dfl_cgrp->kn->id;
	/* The namespace the paths of this record are resolved in: a private
	 * one (unshare -m, a container) may bind anything on any name. A
	 * task has an nsproxy from its fork to its exit. */
	c->mntns_ino = t->nsproxy->mnt_ns->ns.inum;
	c->pad = 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	struct event *e;

	/* A new thread joins an existing group: not a process. */
	if (child->pid != child->tgid)
		return 0;
	/* The child's start_boottime is the time of the fork on the clock
	 * bpf_ktime_get_boot_ns reads (copy_process set it a moment ago), and
	 * a field load: reading the clock costs 0.4-0.6 us a call where the
	 * clocksource is kvm-clock without a stable TSC (every read takes a
	 * global cache line, pvclock's last_value). */
	e = reserve_size(KIND_FORK, want_context ? sizeof(struct fork_event) : sizeof(struct event),
			 child->start_boottime);
	if (!e)
		return 0;
	/* The birth parent is the creator (current), not real_parent, which
	 * CLONE_PARENT may point elsewhere. */
	fill_ids(e, child, parent->group_leader);
	e->tid = child->pid;
	copy_comm(e->comm, child);
	if (want_context)
		fill_ctx(&((struct fork_event *)e)->ctx, child);
	submit(e);
	return 0;
}

/* put_name appends the NUL-terminated name at the cursor, within the
 * current blob, and returns -1 when it did not fit whole or could not be
 * read. */
static __always_inline int put_name(struct scratch *s, const void *name)
{
	__u8 *data = (__u8 *)(s + 1);
	__u32 p = s->pos, end = s->end, room;
	long n;

	if (p >= end || p > AREA - NAME_BUF)
		return -1;
	room = end - p;
	if (room > NAME_BUF)
		room = NAME_BUF;
	n = bpf_probe_read_kernel_str(data + p, room, name);
	/* A result of room is a whole name only if room was the full
	 * NAME_BUF (names are at most 255 bytes). */
	if (n <= 1 || (n == room && room < NAME_BUF))
		return -1;
	s->pos = p + n;
	return 0;
}

/* begin_blob starts a blob of at most PATH_BYTES at the cursor. */
static __always_inline void begin_blob(struct scratch *s)
{
	s->end = s->pos + PATH_BYTES;
}

/* as_dentry makes a dentry address read as a number into a BTF pointer, so
 * that its fields can be read by direct loads. */
static __always_inline struct dentry *as_dentry(void *d)
{
	return bpf_rdonly_cast(d, bpf_core_type_id_kernel(struct dentry));
}

/* Open-coded numeric iterator (kfuncs, Linux 6.4+): the verifier checks a
 * loop over it by convergence of its states instead of unrolling it, so
 * the walk's two kinds of step (a name, a mount crossing) do not multiply
 * the paths it explores. */
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

/* real_mount is the struct mount around vfsmount vm (container_of, as a
 * BTF pointer the verifier lets the program read by direct loads). */
static __always_inline struct mount *real_mount(struct vfsmount *vm)
{
	return bpf_rdonly_cast((void *)vm - bpf_core_field_offset(struct mount, mnt),
			       bpf_core_type_id_kernel(struct mount));
}

/* walk_path appends the names of path (d, vm) from the leaf up to the root
 * (rootd, rootvm), and returns -1 when it stopped before (bounds, a
 * disconnected dentry, the top of a mount tree, a failed read). Dentries
 * and mounts are read by direct loads; only the names are copied with a
 * helper. */
static __always_inline int walk_path(struct scratch *s, struct dentry *d, struct vfsmount *vm,
				     struct dentry *rootd, struct vfsmount *rootvm)
{
	struct bpf_iter_num it;
	struct mount *m, *rootm;
	struct dentry *mroot;
	__u8 *data = (__u8 *)(s + 1);
	int ret = -1;

	begin_blob(s);
	if (!d || !vm || !rootvm)
		return -1;
	d = as_dentry(d);
	m = real_mount(vm);
	rootm = real_mount(rootvm);
	mroot = vm->mnt_root;
	bpf_iter_num_new(&it, 0, PATH_DEPTH);
	while (bpf_iter_num_next(&it)) {
		struct dentry *parent;

		if ((void *)d == (void *)rootd && m == rootm) {
			ret = 0;
			break;
		}
		if ((void *)d == (void *)mroot) {
			struct mount *mp = m->mnt_parent;

			/* The top of a mount tree without meeting the root: the
			 * path is outside the task's root (a descriptor from
			 * beyond a chroot, another mount namespace) or on a
			 * detached mount (umount -l, open_tree), and the names
			 * so far are no absolute path in the task's view. */
			if (mp == m)
				break;
			d = as_dentry(m->mnt_mountpoint);
			m = mp;
			mroot = mp->mnt.mnt_root;
			continue;
		}
		parent = d->d_parent;
		if (!parent)
			break;
		if (parent == d) {
			/* A disconnected dentry: a pseudo file's (memfd:NAME,
			 * what fileless programs run from) is its name; an
			 * anonymous one's, or a filesystem root's, is "/". */
			__u32 p = s->pos;

			if (put_name(s, d->d_name.name) == 0 && s->pos == p + 2 && p < AREA && data[p] == '/')
				s->pos = p;
			break;
		}
		if (put_name(s, d->d_name.name) < 0)
			break;
		d = as_dentry(parent);
	}
	bpf_iter_num_destroy(&it);
	return ret;
}

/* unlinked reports what d_path marks " (deleted)" (d_unlinked): a dentry
 * unhashed while in use, its name unlinked or its directory removed, that
 * is not its own parent (a filesystem's root and a pseudo file, a memfd,
 * are never hashed and have no name to lose). */
static __always_inline int unlinked(struct dentry *d)
{
	return d && !d->d_hash.pprev && d->d_parent != d;
}

static __always_inline struct kernfs_node *kn_parent(struct kernfs_node *kn)
{
	struct kernfs_node___new *n = (void *)kn;
	struct kernfs_node___old *o = (void *)kn;

	if (bpf_core_field_exists(n->__parent))
		return n->__parent;
	return o->parent;
}

/* walk_cgroup appends the names of a kernfs node up to its root (whose own
 * name is not part of the path). */
static __always_inline int walk_cgroup(struct scratch *s, struct kernfs_node *kn)
{
	struct bpf_iter_num it;
	int ret = -1;

	begin_blob(s);
	if (!kn)
		return -1;
	bpf_iter_num_new(&it, 0, CGROUP_DEPTH);
	while (bpf_iter_num_next(&it)) {
		struct kernfs_node *parent = kn_parent(kn);

		if (!parent) {
			ret = 0;
			break;
		}
		if (put_name(s, kn->name) < 0)
			break;
		kn = parent;
	}
	bpf_iter_num_destroy(&it);
	return ret;
}

/* walk_cgroup_top appends, leaf first, the names of the top CGROUP_TOP
 * levels of cgroup cg (below the root, whose name is no part of the path):
 * called only when walk_cgroup stopped at its bound, so cg is deeper. */
static __always_inline int walk_cgroup_top(struct scratch *s, struct cgroup *cg)
{
	__u32 level = cg->level;
	int i;

	s->end = s->pos + CGROUP_TOP * NAME_BUF;
	if (level <= CGROUP_TOP)
		return -1;
	for (i = CGROUP_TOP; i > 0; i--) {
		struct cgroup *a;

		if (bpf_probe_read_kernel(&a, sizeof(a), (void *)cg + bpf_core_field_offset(struct cgroup, ancestors) +
					  i * sizeof(struct cgroup *)) < 0 || !a)
			return -1;
		a = bpf_rdonly_cast(a, bpf_core_type_id_kernel(struct cgroup));
		if (put_name(s, a->kn->name) < 0)
			return -1;
	}
	return 0;
}

/* exec_context sends an exec record with the context of p: assembled in
 * the scratch entry of this CPU, sent with bpf_ringbuf_output. */
static __always_inline void exec_context(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *s = bpf_map_lookup_elem(&scratch, &cpu);
	struct exec_event *x;
	struct fs_struct *fs;
	struct dentry *rootd;
	struct vfsmount *rootvm;
	struct file *f;
	struct mm_struct *mm;
	unsigned long as, ae;
	__u64 size;
	__u32 pos, mark, n, zero = 0, *skip;
	__u8 *data;

	if (!s) {
		count_lost();
		return;
	}
	x = &s->x;
	data = (__u8 *)(s + 1);
	x->ev.time_ns = bpf_ktime_get_boot_ns();
	x->ev.kind = KIND_EXEC;
	x->ev.status = 0;
	x->ev.flags = 0;
	fill_ids(&x->ev, p, p->real_parent->group_leader);
	x->ev.tid = old_pid;
	copy_comm(x->ev.comm, p);
	fill_ctx(&x->ctx, p);
	x->argc = bprm->argc;
	x->xflags = 0;
	x->cgtop_len = 0;
	s->pos = 0;

	skip = bpf_map_lookup_elem(&skip_blobs, &zero);
	if (skip && *skip) {
		x->xflags = X_SKIPPED;
		x->exe_len = x->cwd_len = x->cgroup_len = 0;
		x->args_size = x->args_len = 0;
		if (bpf_ringbuf_output(&events, x, sizeof(*x), RB_NO_WAKEUP) < 0)
			count_lost();
		wake_reader(x->ev.time_ns);
		return;
	}

	fs = p->fs;
	rootd = fs->root.dentry;
	rootvm = fs->root.mnt;
	f = bprm->file;
	if (!f) {
		x->xflags |= X_NO_EXE;
	} else {
		if (unlinked(f->f_path.dentry))
			x->xflags |= X_EXE_DELETED;
		if (walk_path(s, f->f_path.dentry, f->f_path.mnt, rootd, rootvm) < 0)
			x->xflags |= X_EXE_TRUNC;
	}
	x->exe_len = s->pos;
	mark = s->pos;
	if (unlinked(fs->pwd.dentry))
		x->xflags |= X_CWD_DELETED;
	if (walk_path(s, fs->pwd.dentry, fs->pwd.mnt, rootd, rootvm) < 0)
		x->xflags |= X_CWD_TRUNC;
	x->cwd_len = s->pos - mark;
	mark = s->pos;
	if (walk_cgroup(s, p->cgroups->dfl_cgrp->kn) < 0) {
		x->xflags |= X_CGROUP_TRUNC;
		x->cgroup_len = s->pos - mark;
		mark = s->pos;
		if (walk_cgroup_top(s, p->cgroups->dfl_cgrp) < 0)
			s->pos = mark; /* all or nothing */
		x->cgtop_len = s->pos - mark;
	} else {
		x->cgroup_len = s->pos - mark;
	}

	mm = p->mm;
	as = mm->arg_start;
	ae = mm->arg_end;
	size = ae > as ? ae - as : 0;
	x->args_size = size;
	if (size > argv_max) {
		n = argv_max;
		x->xflags |= X_ARGS_TRUNC;
	} else {
		n = size;
	}
	pos = s->pos;
	if (pos > AREA)
		return; /* cannot happen: put_name keeps it below */
	if (n > 0 && bpf_probe_read_user(data + pos, n, (void *)as) < 0) {
		n = 0;
		x->xflags |= X_ARGS_FAULT;
	}
	x->args_len = n;
	if (bpf_ringbuf_output(&events, x, sizeof(*x) + pos + n, RB_NO_WAKEUP) < 0)
		count_lost();
	wake_reader(x->ev.time_ns);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct event *e;

	if (want_context) {
		exec_context(p, old_pid, bprm);
		return 0;
	}
	e = reserve(KIND_EXEC);
	if (!e)
		return 0;
	/* de_thread has run: p leads the group now, even if it was another
	 * thread (old_pid) that called execve. */
	fill_ids(e, p, p->real_parent->group_leader);
	e->tid = old_pid;
	copy_comm(e->comm, p);
	submit(e);
	return 0;
}

static __always_inline int report_exit(struct task_struct *p)
{
	struct task_struct *leader = p->group_leader;
	struct signal_struct *sig = p->signal;
	struct event *e = reserve(KIND_EXIT);

	if (!e)
		return 0;
	fill_ids(e, leader, leader->real_parent->group_leader);
	e->tid = p->pid;
	/* What wait(2) reports (wait_task_zombie): the group's code after a
	 * group exit, otherwise the leader's own code. */
	if (sig->flags & SIGNAL_GROUP_EXIT)
		e->status = sig->group_exit_code;
	else
		e->status = leader->exit_code;
	copy_comm(e->comm, leader);
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
	if (p->signal->live.counter != 0)
		return 0;
	return report_exit(p);
}
