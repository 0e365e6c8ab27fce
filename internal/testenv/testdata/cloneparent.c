//go:build ignore

// cloneparent N: makes N children with CLONE_PARENT, so that they are
// children of this process's parent, not of this process; each exits at
// once. Then it waits to be killed.
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 1;
	for (int i = 0; i < n; i++) {
		long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
		if (pid < 0) {
			perror("clone");
			return 1;
		}
		if (pid == 0)
			_exit(0);
	}
	printf("made %d\n", n);
	fflush(stdout);
	for (;;)
		pause();
}
