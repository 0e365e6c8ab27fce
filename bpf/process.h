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
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
};

#define BPF_ANY 0
#define BPF_F_MMAPABLE (1U << 10)

#define TASK_COMM_LEN 16

/* include/linux/sched/signal.h */
#define SIGNAL_GROUP_EXIT 0x00000004

typedef struct {
	int counter;
} atomic_t;

/* include/linux/pid_namespace.h: the deepest pid namespace level. */
#define MAX_PID_NS_LEVEL 32

/* include/linux/pid_types.h */
enum pid_type_subset {
	PIDTYPE_PID = 0,
	PIDTYPE_TGID = 1,
	PIDTYPE_PGID = 2,
	PIDTYPE_SID = 3,
};

struct hlist_node {
	struct hlist_node *next;
} __attribute__((preserve_access_index));

struct hlist_head {
	struct hlist_node *first;
} __attribute__((preserve_access_index));

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct pid_namespace {
	struct ns_common ns;
} __attribute__((preserve_access_index));

/* fs/mount.h */
struct mnt_namespace {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct mnt_namespace *mnt_ns;
} __attribute__((preserve_access_index));

struct upid {
	int nr;
	struct pid_namespace *ns;
} __attribute__((preserve_access_index));

struct pid {
	unsigned int level;
	/* pidfs inode id (6.9+); inside an anonymous struct since 6.14. */
	u64 ino;
	struct hlist_head tasks[4];
	struct upid numbers[1];
} __attribute__((preserve_access_index));

struct tty_driver {
	int major;
	int minor_start;
} __attribute__((preserve_access_index));

struct tty_struct {
	int index;
	struct tty_driver *driver;
} __attribute__((preserve_access_index));

struct signal_struct {
	atomic_t live;
	int group_exit_code;
	unsigned int flags;
	struct pid *pids[4];
	struct tty_struct *tty;
} __attribute__((preserve_access_index));

typedef struct {
	__u32 val;
} kuid_t;

typedef struct {
	__u32 val;
} kgid_t;

struct group_info {
	int ngroups;
	kgid_t gid[];
} __attribute__((preserve_access_index));

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t suid;
	kgid_t sgid;
	kuid_t euid;
	kgid_t egid;
	struct group_info *group_info;
} __attribute__((preserve_access_index));

struct qstr {
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct hlist_bl_node {
	struct hlist_bl_node *next, **pprev;
} __attribute__((preserve_access_index));

/* d_name sits in an anonymous union (with __d_name) since 6.14: CO-RE finds
 * it by name either way. d_hash.pprev is NULL while the dentry is unhashed
 * (d_unhashed): unlinked or removed while in use, or never hashed (a
 * filesystem's root, a pseudo file's: those are their own parent). */
struct dentry {
	struct hlist_bl_node d_hash;
	struct dentry *d_parent;
	struct qstr d_name;
} __attribute__((preserve_access_index));

struct vfsmount {
	struct dentry *mnt_root;
} __attribute__((preserve_access_index));

/* fs/mount.h: struct vfsmount is embedded in struct mount as mnt. */
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
} __attribute__((preserve_access_index));

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct fs_struct {
	struct path root;
	struct path pwd;
} __attribute__((preserve_access_index));

struct inode {
	__u32 i_rdev;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct kernfs_node {
	const char *name;
	u64 id;
} __attribute__((preserve_access_index));

/* The parent link of a kernfs node is __parent since 6.15, parent before. */
struct kernfs_node___new {
	struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

struct kernfs_node___old {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

/* ancestors[i] is the cgroup's ancestor at level i, ancestors[level] the
 * cgroup itself (Linux 6.0+). */
struct cgroup {
	struct kernfs_node *kn;
	int level;
	struct cgroup *ancestors[];
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
} __attribute__((preserve_access_index));

struct task_struct {
	int exit_code;
	pid_t pid;
	pid_t tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	struct hlist_node pid_links[4];
	u64 start_boottime;
	char comm[TASK_COMM_LEN];
	struct signal_struct *signal;
	const struct cred *real_cred;
	struct fs_struct *fs;
	struct files_struct *files;
	struct mm_struct *mm;
	struct css_set *cgroups;
	struct nsproxy *nsproxy;
	/* CONFIG_AUDIT only: read behind bpf_core_field_exists. */
	kuid_t loginuid;
	unsigned int sessionid;
} __attribute__((preserve_access_index));

struct linux_binprm {
	const char *filename;
	struct file *file;
	int argc;
} __attribute__((preserve_access_index));

#endif
