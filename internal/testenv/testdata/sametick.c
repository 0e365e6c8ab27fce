// sametick: recreate a pid inside one clock tick. Usage: sametick PID
// Creates process A at PID (clone3 set_tid), reads A's start time (clock
// ticks, /proc/PID/stat field 22) and pidfs inode through a pidfd, kills and
// reaps A, and at once creates B at the same PID. Prints
// "A_TICKS A_INO B_PID\n", then waits for B and exits with its status.
// Exit 17: the pid was taken.
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

static long spawn(pid_t want, int *pidfd) {
	pid_t tid[1] = {want};
	struct clone_args args;
	memset(&args, 0, sizeof(args));
	args.flags = CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	args.exit_signal = SIGCHLD;
	args.set_tid = (uint64_t)(uintptr_t)tid;
	args.set_tid_size = 1;
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
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

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: sametick PID\n");
		return 2;
	}
	pid_t want = (pid_t)atoi(argv[1]);
	int pfd = -1;
	long a = spawn(want, &pfd);
	if (a < 0)
		return errno == EEXIST ? 17 : 1;
	struct stat st;
	fstat(pfd, &st);
	unsigned long long ticks = start_ticks((pid_t)a);
	kill((pid_t)a, SIGKILL);
	waitpid((pid_t)a, NULL, 0);
	int pfd2 = -1;
	long b = spawn(want, &pfd2);
	if (b < 0)
		return errno == EEXIST ? 17 : 1;
	printf("%llu %llu %ld\n", ticks, (unsigned long long)st.st_ino, b);
	fflush(stdout);
	int status;
	while (waitpid((pid_t)b, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}
