/*
 * storm.c: an exec storm for scripts/execstorm.sh.
 *
 *   storm -t TARGET -p PREFIX -n N [-w W] [-k small|4k]
 *
 * W workers (default: the online CPUs) fork, exec TARGET and reap it, N
 * times in all; worker w runs the counters i = w, w + W, ... < N. Each exec
 * has a unique argv naming its counter, so an observer's report can be
 * checked exec by exec (the checker in execstorm.sh builds the same argv):
 *
 *   small  TARGET PREFIX-i -a --flag=value xyz
 *   4k     TARGET PREFIX-i and 32 arguments of 127 bytes (4 KiB with NULs),
 *          argument j being the letter 'a' + j % 26 repeated
 *
 * The environment is empty. Prints "execs=N failed=F secs=S rate=R cpu=C":
 * execs a second of wall time, from the first fork to the last reap, and
 * the CPU time of the workers and their children (user and system, from
 * getrusage of the reaped children) per exec in microseconds. An observer
 * that works in the exec'ing process (a probe, audit's syscall exit) adds
 * to C, and C moves less than R when other work shares the cores.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG_ARGS 32
#define BIG_LEN 127

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int worker(const char *target, const char *prefix, long n, long w, long step, int big)
{
	static char bigargs[BIG_ARGS][BIG_LEN + 1];
	/* On the stack, like the counter: a page the child shares with the
	 * parent after fork (a string literal's page may not be mapped in the
	 * child yet, and a probe at execve's entry cannot fault it in). */
	char small[3][16] = {"-a", "--flag=value", "xyz"};
	char *argv[BIG_ARGS + 4];
	char *envp[] = {NULL};
	char counter[64];
	int failed = 0, j;
	long i;

	for (j = 0; j < BIG_ARGS; j++) {
		memset(bigargs[j], 'a' + j % 26, BIG_LEN);
		bigargs[j][BIG_LEN] = 0;
	}
	argv[0] = (char *)target;
	argv[1] = counter;
	if (big) {
		for (j = 0; j < BIG_ARGS; j++)
			argv[2 + j] = bigargs[j];
		argv[2 + BIG_ARGS] = NULL;
	} else {
		argv[2] = small[0];
		argv[3] = small[1];
		argv[4] = small[2];
		argv[5] = NULL;
	}
	for (i = w; i < n; i += step) {
		int status;
		pid_t pid;

		snprintf(counter, sizeof(counter), "%s-%ld", prefix, i);
		pid = fork();
		if (pid < 0) {
			perror("storm: fork");
			return 1;
		}
		if (pid == 0) {
			execve(target, argv, envp);
			_exit(127);
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed++;
	}
	return failed > 255 ? 255 : failed;
}

int main(int argc, char **argv)
{
	const char *target = NULL, *prefix = NULL;
	long n = 0, workers = sysconf(_SC_NPROCESSORS_ONLN), w;
	int big = 0, opt, failed = 0;
	double t0, t1, cpu;
	struct rusage ru;

	while ((opt = getopt(argc, argv, "t:p:n:w:k:")) != -1) {
		switch (opt) {
		case 't': target = optarg; break;
		case 'p': prefix = optarg; break;
		case 'n': n = atol(optarg); break;
		case 'w': workers = atol(optarg); break;
		case 'k': big = strcmp(optarg, "4k") == 0; break;
		default: return 64;
		}
	}
	if (!target || !prefix || n <= 0 || workers <= 0) {
		fprintf(stderr, "usage: storm -t TARGET -p PREFIX -n N [-w W] [-k small|4k]\n");
		return 64;
	}
	t0 = now();
	for (w = 0; w < workers; w++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("storm: fork");
			return 1;
		}
		if (pid == 0)
			_exit(worker(target, prefix, n, w, workers, big));
	}
	for (w = 0; w < workers; w++) {
		int status;

		if (wait(&status) < 0) {
			perror("storm: wait");
			return 1;
		}
		failed += WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	t1 = now();
	if (getrusage(RUSAGE_CHILDREN, &ru) < 0) {
		perror("storm: getrusage");
		return 1;
	}
	cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	printf("execs=%ld failed=%d secs=%.3f rate=%.0f cpu=%.2f\n", n, failed, t1 - t0, n / (t1 - t0), cpu * 1e6 / n);
	return failed ? 1 : 0;
}
