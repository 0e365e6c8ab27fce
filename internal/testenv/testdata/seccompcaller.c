/* seccompcaller: drops to the uid and gid given (when given), then puts
 * itself under a seccomp filter that refuses mkdir and mkdirat with
 * EOPNOTSUPP (with "strict", in seccomp's strict mode instead; with
 * "fake", under one that also answers 0 for the calls that change ids and
 * capabilities, without running them; with "vfork", then sits in a vfork
 * whose child sleeps, in uninterruptible sleep; with "noseccomp", under a
 * first filter that refuses seccomp(2) itself, the second attached with
 * prctl), prints its pid and blocks for good. For the tests of what a
 * caller's filters bound. */
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

int main(int argc, char **argv) {
	int strict = argc > 1 && strcmp(argv[1], "strict") == 0;
	int fake = argc > 1 && strcmp(argv[1], "fake") == 0;
	int held = argc > 1 && strcmp(argv[1], "vfork") == 0;
	int noseccomp = argc > 1 && strcmp(argv[1], "noseccomp") == 0;
	if (strict || fake || held || noseccomp) {
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
	if (strict) {
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)) {
			perror("seccompcaller: strict");
			return 1;
		}
	} else if (fake) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setresuid, 7, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setresgid, 6, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setgroups, 5, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_capset, 4, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_capget, 3, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 2, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdirat, 2, 0),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EOPNOTSUPP),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
			perror("seccompcaller: filter");
			return 1;
		}
	} else {
		if (noseccomp) {
			struct sock_filter n[] = {
				BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
				BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 1),
				BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
				BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
			};
			struct sock_fprog np = {sizeof n / sizeof n[0], n};
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &np)) {
				perror("seccompcaller: first filter");
				return 1;
			}
		}
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdirat, 2, 0),
#ifdef __NR_mkdir
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdir, 1, 0),
#else
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdirat, 1, 0),
#endif
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EOPNOTSUPP),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
			perror("seccompcaller: filter");
			return 1;
		}
	}
	if (held && vfork() == 0) {
		sleep(600); /* the parent waits, unkillable but by SIGKILL */
		_exit(0);
	}
	char c;
	for (;;)
		read(p[0], &c, 1); /* the write end stays open: blocks for good */
}
