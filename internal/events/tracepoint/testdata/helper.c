// helper.c: processes with the thread and fork shapes the integration tests
// need. Built by the tests with gcc; not part of the package.
//
//	helper thread-exec        a non-leader thread execs /bin/sh -c 'exit 5'
//	helper threads N          N threads come and go, then exit 0
//	helper leader-first       the leader thread exits first; the last thread
//	                          exits the process with status 4
//	helper double-fork        fork a child that forks a grandchild and exits;
//	                          the grandchild prints its pid, waits to be
//	                          reparented and exits 7
//	helper storm N            after a byte on stdin, fork N children (64
//	                          at a time) that exit at once, reaping them
//	helper fexecve PATH ARG.. open PATH and run it by descriptor
//	                          (execveat with AT_EMPTY_PATH, as fexecve does)
//	                          with argv ARG..
//	helper chroot-fexecve DIR PATH ARG..
//	                          in a mount namespace of its own, bind DIR to
//	                          / (recursively), open PATH, chroot to DIR
//	                          without changing directory and run PATH by
//	                          descriptor: program and directory are
//	                          outside the root
//	helper chroot-exec DIR PATH ARG..
//	                          the same chroot, then chdir to / and execve
//	                          PATH, a path inside the root
//	helper nest-pidns N PATH ARG..
//	                          create N nested pid namespaces (a fork into
//	                          each), then execve PATH in the deepest
#define _GNU_SOURCE
#include <sched.h>
#include <sys/mount.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *exec_thread(void *arg)
{
	(void)arg;
	char *argv[] = {"sh", "-c", "exit 5", NULL};
	execv("/bin/sh", argv);
	perror("execv");
	_exit(100);
}

static void *idle_thread(void *arg)
{
	(void)arg;
	return NULL;
}

static void *last_thread(void *arg)
{
	pid_t leader = *(pid_t *)arg;
	char path[64];
	char buf[512];
	/* Wait until the leader thread is a zombie, so this thread is last. */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", leader, leader);
	for (int i = 0; i < 10000; i++) {
		FILE *f = fopen(path, "r");
		if (!f)
			break;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		char *p = strrchr(buf, ')');
		if (p && (p[2] == 'Z' || p[2] == 'X'))
			break;
		usleep(1000);
	}
	exit(4);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "fexecve") && argc >= 4) {
		extern char **environ;
		int fd = open(argv[2], O_RDONLY | O_CLOEXEC);

		if (fd < 0) {
			perror("open");
			return 100;
		}
		syscall(SYS_execveat, fd, "", &argv[3], environ, AT_EMPTY_PATH);
		perror("execveat");
		return 100;
	}
	if ((!strcmp(argv[1], "chroot-fexecve") || !strcmp(argv[1], "chroot-exec")) && argc >= 5) {
		extern char **environ;
		int fd;

		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("/", argv[2], NULL, MS_BIND | MS_REC, NULL)) {
			perror("mount namespace");
			return 100;
		}
		fd = open(argv[3], O_RDONLY | O_CLOEXEC);
		if (fd < 0 || chroot(argv[2])) {
			perror("chroot");
			return 100;
		}
		if (!strcmp(argv[1], "chroot-exec")) {
			if (chdir("/"))
				return 100;
			execve(argv[3], &argv[4], environ);
		} else {
			syscall(SYS_execveat, fd, "", &argv[4], environ, AT_EMPTY_PATH);
		}
		perror("exec");
		return 100;
	}
	if (!strcmp(argv[1], "nest-pidns") && argc >= 4) {
		int n = atoi(argv[2]);

		for (int i = 0; i < n; i++) {
			pid_t child;
			int st;

			if (unshare(CLONE_NEWPID)) {
				perror("unshare");
				return 100;
			}
			child = fork();
			if (child < 0)
				return 101;
			if (child == 0)
				continue;
			if (waitpid(child, &st, 0) < 0)
				return 101;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 102;
		}
		execv(argv[3], &argv[4]);
		perror("execv");
		return 100;
	}
	if (!strcmp(argv[1], "thread-exec")) {
		pthread_t t;
		if (pthread_create(&t, NULL, exec_thread, NULL))
			return 101;
		pthread_join(t, NULL);
		return 102;
	}
	if (!strcmp(argv[1], "threads") && argc == 3) {
		int n = atoi(argv[2]);
		for (int i = 0; i < n; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, idle_thread, NULL))
				return 101;
			pthread_join(t, NULL);
		}
		return 0;
	}
	if (!strcmp(argv[1], "leader-first")) {
		static pid_t leader;
		pthread_t t;
		leader = getpid();
		if (pthread_create(&t, NULL, last_thread, &leader))
			return 101;
		pthread_exit(NULL);
	}
	if (!strcmp(argv[1], "double-fork")) {
		pid_t child = fork();
		if (child < 0)
			return 101;
		if (child == 0) {
			pid_t mid = getpid();
			pid_t gc = fork();
			if (gc < 0)
				_exit(101);
			if (gc == 0) {
				printf("%d\n", getpid());
				fflush(stdout);
				for (int i = 0; i < 10000 && getppid() == mid; i++)
					usleep(1000);
				_exit(7);
			}
			_exit(0);
		}
		int st;
		waitpid(child, &st, 0);
		return 0;
	}
	if (!strcmp(argv[1], "storm") && argc == 3) {
		int n = atoi(argv[2]);
		char c;
		if (read(0, &c, 1) != 1)
			return 101;
		/* Batches of 64 live children, so the events come in bursts. */
		for (int i = 0; i < n; i += 64) {
			int k = n - i < 64 ? n - i : 64;
			for (int j = 0; j < k; j++) {
				pid_t p = fork();
				if (p < 0)
					return 102;
				if (p == 0)
					_exit(0);
			}
			for (int j = 0; j < k; j++) {
				int st;
				wait(&st);
			}
		}
		return 0;
	}
	return 2;
}
