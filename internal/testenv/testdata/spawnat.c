//go:build ignore

// spawnat: create processes at an exact pid with clone3(set_tid), for tests
// that force pid reuse. Needs CAP_SYS_ADMIN over the pid namespace.
//
//   spawnat PID [PROGRAM ARGS...]
//     Starts a child at PID that runs PROGRAM (or pauses when none is
//     given), prints "PID\n" once the child exists, then waits for it and
//     exits with its status.
//
//   spawnat -then PID PROGRAM [ARGS...]
//     As spawnat PID PROGRAM, and once PROGRAM's process has exited (and
//     been reaped: it is this helper's child) starts another at PID at once,
//     which pauses; prints "PID\n" again once it exists, then waits for it.
//     A stranger reusing the pid within a few milliseconds of the first
//     one's end, not after init got round to reaping it.
//
//   spawnat -sametick PID
//     Recreates PID inside one clock tick: starts A at PID, reads A's start
//     time (clock ticks, /proc/PID/stat field 22) and pidfs inode through a
//     pidfd, kills and reaps A, and at once starts B (which pauses) at PID.
//     Prints "A_TICKS A_INO B_PID\n", then waits for B.
//
// Exit 17 in either mode: the pid was taken (EEXIST).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_TAKEN 17

// clone_at forks at exactly pid want; pidfd, when not NULL, receives a pidfd
// for the child. It returns as fork does, and exits the helper on failure.
static pid_t clone_at(pid_t want, int *pidfd) {
	pid_t tid[1] = {want};
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	if (pidfd) {
		args.flags = CLONE_PIDFD;
		args.pidfd = (uint64_t)(uintptr_t)pidfd;
	}
	args.exit_signal = SIGCHLD;
	args.set_tid = (uint64_t)(uintptr_t)tid;
	args.set_tid_size = 1;
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		int e = errno;
		fprintf(stderr, "spawnat: clone3 set_tid %d: %s\n", want, strerror(e));
		exit(e == EEXIST ? EXIT_TAKEN : 1);
	}
	return (pid_t)pid;
}

static void pause_forever(void) {
	for (;;)
		pause();
}

static int wait_exit_status(pid_t pid) {
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

static unsigned long long start_ticks(pid_t pid) {
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	// fields after comm start at 3; starttime is field 22
	for (int field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int spawn(pid_t want, char **argv, int then) {
	pid_t pid = clone_at(want, NULL);
	if (pid == 0) {
		if (argv[0]) {
			execvp(argv[0], argv);
			_exit(127);
		}
		pause_forever();
	}
	printf("%d\n", pid);
	fflush(stdout);
	int status = wait_exit_status(pid);
	if (!then)
		return status;
	pid = clone_at(want, NULL);
	if (pid == 0)
		pause_forever();
	printf("%d\n", pid);
	fflush(stdout);
	return wait_exit_status(pid);
}

static int sametick(pid_t want) {
	int pfd = -1;
	pid_t a = clone_at(want, &pfd);
	if (a == 0)
		pause_forever();
	struct stat st;
	if (fstat(pfd, &st) < 0)
		st.st_ino = 0;
	unsigned long long ticks = start_ticks(a);
	kill(a, SIGKILL);
	wait_exit_status(a);
	pid_t b = clone_at(want, NULL);
	if (b == 0)
		pause_forever();
	printf("%llu %llu %d\n", ticks, (unsigned long long)st.st_ino, b);
	fflush(stdout);
	return wait_exit_status(b);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "-sametick") == 0)
		return sametick((pid_t)atoi(argv[2]));
	if (argc >= 4 && strcmp(argv[1], "-then") == 0)
		return spawn((pid_t)atoi(argv[2]), argv + 3, 1);
	if (argc >= 2 && argv[1][0] != '-')
		return spawn((pid_t)atoi(argv[1]), argv + 2, 0);
	fprintf(stderr, "usage: spawnat PID [PROGRAM ARGS...]\n       spawnat -then PID PROGRAM [ARGS...]\n       spawnat -sametick PID\n");
	return 2;
}
