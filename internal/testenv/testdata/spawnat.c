// spawnat: start a process at an exact pid with clone3(set_tid), for tests
// that force pid reuse. Usage: spawnat PID [PROGRAM ARGS...]
// The child runs PROGRAM (or pauses when none is given). The parent prints
// "PID\n" on stdout once the child exists, then waits for it and exits with
// its status. Exit 17 means the pid was taken (EEXIST).
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: spawnat PID [PROGRAM ARGS...]\n");
		return 2;
	}
	pid_t want = (pid_t)atoi(argv[1]);
	pid_t tid[1] = {want};
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	args.set_tid = (uint64_t)(uintptr_t)tid;
	args.set_tid_size = 1;
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		int e = errno;
		fprintf(stderr, "spawnat: clone3 set_tid %d: %s\n", want, strerror(e));
		return e == EEXIST ? 17 : 1;
	}
	if (pid == 0) {
		if (argc > 2) {
			execvp(argv[2], argv + 2);
			_exit(127);
		}
		for (;;)
			pause();
	}
	printf("%ld\n", pid);
	fflush(stdout);
	int status;
	while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}
