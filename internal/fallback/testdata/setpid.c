//go:build ignore

// setpid PID PROG [ARG...]: run PROG as a new process with exactly pid PID
// (clone3 set_tid; needs CAP_SYS_ADMIN over the pid namespace). The new
// process is a sibling of setpid (CLONE_PARENT), so the caller that started
// setpid is its parent and reaps it. setpid prints nothing and exits 0 once
// the clone succeeded, 17 when PID was taken (EEXIST), 1 on other errors.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: setpid PID PROG [ARG...]\n");
		return 1;
	}
	pid_t want = (pid_t)atoi(argv[1]);
	struct clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_PARENT;
	ca.exit_signal = 0; /* ignored with CLONE_PARENT: the child inherits setpid's exit signal, SIGCHLD */
	ca.set_tid = (uint64_t)(uintptr_t)&want;
	ca.set_tid_size = 1;
	long pid = syscall(SYS_clone3, &ca, sizeof ca);
	if (pid < 0) {
		int e = errno;
		fprintf(stderr, "clone3 set_tid %d: %s\n", want, strerror(e));
		return e == EEXIST ? 17 : 1;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		_exit(127);
	}
	return 0;
}
