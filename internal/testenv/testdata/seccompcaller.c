/* seccompcaller: drops to the uid and gid given (when given), then puts
 * itself under a seccomp filter that refuses mkdir and mkdirat with
 * EOPNOTSUPP (with "strict", in seccomp's strict mode instead; with
 * "fake", under one that also answers 0 for the calls that change ids and
 * capabilities, without running them; with "vfork", then sits in a vfork
 * whose child sleeps, in uninterruptible sleep; with "noseccomp", under a
 * first filter that refuses seccomp(2) itself, the second attached with
 * prctl ("noseccompexit": the first refuses exit and exit_group too);
 * with "noexec", under one that refuses execve, execveat and every
 * way to exit or be sent a signal but SIGKILL; with "killexec" and
 * "trapexec", under one that kills the process or traps at execve and
 * execveat; with "mute", under one that refuses execve, execveat, write
 * and the exit), prints its pid and blocks
 * for good. For the tests of what a caller's filters bound. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* install puts the process under a filter that answers ret for the n
 * system calls nrs and lets every other through. */
static int install(const int *nrs, int n, unsigned int ret) {
	struct sock_filter f[2 + 16 + 1];
	int i = 0;
	if (n > 16)
		return -1;
	f[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (int k = 0; k < n; k++)
		f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[k], n - k, 0);
	f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret);
	struct sock_fprog prog = {i, f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccompcaller: filter");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv) {
	static const char *modes[] = {"strict", "fake", "vfork", "noseccomp", "noexec", "killexec", "trapexec", "noseccompexit", "mute"};
	const char *mode = "";
	for (int i = 0; argc > 1 && i < (int)(sizeof modes / sizeof modes[0]); i++)
		if (strcmp(argv[1], modes[i]) == 0)
			mode = modes[i];
	if (*mode) {
		argc--;
		argv++;
	}
	if (argc > 2) {
		uid_t u = (uid_t)atoi(argv[1]);
		gid_t g = (gid_t)atoi(argv[2]);
		if (setgroups(0, NULL) || setresgid(g, g, g) || setresuid(u, u, u)) {
			perror("seccompcaller: dropping to the uid");
			return 1;
		}
	}
	int p[2];
	if (pipe(p)) {
		perror("seccompcaller: pipe");
		return 1;
	}
	printf("%d\n", getpid());
	fflush(stdout);
	static const int mkdirs[] = {
		__NR_mkdirat,
#ifdef __NR_mkdir
		__NR_mkdir,
#endif
	};
	static const int seccomp[] = {__NR_seccomp};
	static const int seccompexit[] = {__NR_seccomp, __NR_exit_group, __NR_exit};
	static const int ids[] = {__NR_setresuid, __NR_setresgid, __NR_setgroups, __NR_capset, __NR_capget, __NR_prctl};
	static const int execs[] = {__NR_execve, __NR_execveat};
	static const int mute[] = {__NR_execve, __NR_execveat, __NR_write, __NR_exit_group, __NR_exit};
	static const int ways[] = {__NR_execve, __NR_execveat, __NR_exit_group, __NR_exit, __NR_rt_sigaction, __NR_tgkill, __NR_tkill, __NR_kill};
#define N(a) ((int)(sizeof a / sizeof a[0]))
	int err = 0;
	if (strcmp(mode, "strict") == 0) {
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)) {
			perror("seccompcaller: strict");
			return 1;
		}
	} else if (strcmp(mode, "noexec") == 0) {
		err = install(ways, N(ways), SECCOMP_RET_ERRNO | EPERM);
	} else if (strcmp(mode, "mute") == 0) {
		err = install(mute, N(mute), SECCOMP_RET_ERRNO | EPERM);
	} else if (strcmp(mode, "killexec") == 0) {
		err = install(execs, N(execs), SECCOMP_RET_KILL_PROCESS);
	} else if (strcmp(mode, "trapexec") == 0) {
		err = install(execs, N(execs), SECCOMP_RET_TRAP);
	} else {
		if (strcmp(mode, "noseccomp") == 0)
			err = install(seccomp, N(seccomp), SECCOMP_RET_ERRNO | EPERM);
		if (strcmp(mode, "noseccompexit") == 0)
			err = install(seccompexit, N(seccompexit), SECCOMP_RET_ERRNO | EPERM);
		if (!err)
			err = install(mkdirs, N(mkdirs), SECCOMP_RET_ERRNO | EOPNOTSUPP);
		if (!err && strcmp(mode, "fake") == 0)
			err = install(ids, N(ids), SECCOMP_RET_ERRNO | 0);
	}
	if (err)
		return 1;
	if (strcmp(mode, "vfork") == 0 && vfork() == 0) {
		sleep(600); /* the parent waits, unkillable but by SIGKILL */
		_exit(0);
	}
	char c;
	for (;;)
		read(p[0], &c, 1); /* the write end stays open: blocks for good */
}
