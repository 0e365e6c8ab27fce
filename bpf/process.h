/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * process.h: the few kernel types process.bpf.c reads, instead of a full
 * vmlinux.h. Every struct carries preserve_access_index, so clang emits CO-RE
 * relocations and the loader (cilium/ebpf) matches each field by name against
 * the running kernel's BTF: the declared layout here is never trusted, only
 * the names and types. Fields a kernel may lack are read behind
 * bpf_core_field_exists.
 */
#ifndef SUPERVISOR_PROCESS_H
#define SUPERVISOR_PROCESS_H

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u64 u64;
typedef int pid_t;
typedef _Bool bool;

/* From include/uapi/linux/bpf.h. */
enum bpf_map_type_subset {
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_RINGBUF = 27,
};

#define BPF_ANY 0

#define TASK_COMM_LEN 16

/* include/linux/sched/signal.h */
#define SIGNAL_GROUP_EXIT 0x00000004

typedef struct {
	int counter;
} atomic_t;

struct pid {
	/* pidfs inode id (6.9+); inside an anonymous struct since 6.14. */
	u64 ino;
} __attribute__((preserve_access_index));

struct signal_struct {
	atomic_t live;
	int group_exit_code;
	unsigned int flags;
} __attribute__((preserve_access_index));

struct task_struct {
	int exit_code;
	pid_t pid;
	pid_t tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	u64 start_boottime;
	char comm[TASK_COMM_LEN];
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

struct linux_binprm {
	const char *filename;
} __attribute__((preserve_access_index));

#endif
