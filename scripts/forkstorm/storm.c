/*
 * storm: a fork storm for measuring process-event observers.
 *
 * W worker processes (one per core by default) each create N/W children
 * one after another: fork (or vfork), the child calls _exit(0) at once, the
 * worker waits for it before the next one. Workers start together on a
 * barrier so the storm's rate is the machine's fork+exit ceiling, not the
 * cost of starting the workers.
 *
 * Every child's pid is recorded in a shared array while the storm runs (no
 * I/O during the storm) and written at the end, one per line, to the file
 * named by -o. Pids are reissued within one storm when N exceeds
 * kernel.pid_max, so whoever matches events against the list must count
 * occurrences, not set membership. The children's parents are the workers,
 * whose pids are printed, and whose comm is "fstorm", so observers can tell
 * storm children from the machine's other processes.
 *
 * Output on stdout, one line of key=value pairs:
 *   children=N workers=W mode=vfork pinned=1 elapsed=S rate=R worker_pids=P1,P2
 *
 * Usage: storm [-n children] [-w workers] [-m vfork|fork] [-u] [-o pidfile]
 *
 * -m vfork (the default) is what posix_spawn does; fork pays for copying
 * page tables and the copy-on-write faults that follow, which on a guest
 * with paravirtualised paging (this project's VMs) costs milliseconds per
 * fork and hides the event path behind the fork itself. The kernel reports
 * both the same way (sched_process_fork, PROC_EVENT_FORK).
 *
 * Worker k is pinned to the k-th allowed CPU (children inherit it), so a
 * child runs where its parent waits and no fork pays a cross-CPU wake-up
 * of an idle (halted) vCPU; -u leaves the workers unpinned.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "storm: %s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * spawn creates one child that exits at once. The child never returns from
 * this function, which is what makes vfork safe here: it touches nothing of
 * the parent's frame.
 */
static __attribute__((noinline)) pid_t spawn(int use_vfork)
{
	pid_t pid = use_vfork ? vfork() : fork();
	if (pid == 0)
		_exit(0);
	return pid;
}

/* pin binds the calling process to the k-th CPU it may run on. */
static void pin(long k)
{
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		die("sched_getaffinity");
	int n = CPU_COUNT(&allowed);
	long want = k % n;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed) || want-- > 0)
			continue;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) != 0)
			die("sched_setaffinity");
		return;
	}
}

/* worker creates children [from, to) and records their pids. */
static int worker(int *pids, long from, long to, int use_vfork, int gate, long pin_to)
{
	char c;
	if (prctl(PR_SET_NAME, "fstorm", 0, 0, 0) != 0)
		die("prctl");
	if (pin_to >= 0)
		pin(pin_to);
	if (read(gate, &c, 1) < 0) /* EOF when the parent opens the gate */
		die("read gate");
	for (long i = from; i < to; i++) {
		pid_t pid = spawn(use_vfork);
		if (pid < 0) {
			if (errno == EAGAIN) { /* pid or task limit: retry */
				i--;
				continue;
			}
			die("fork");
		}
		int st;
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				die("waitpid");
		pids[i] = pid;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long n = 50000;
	long w = sysconf(_SC_NPROCESSORS_ONLN);
	int use_vfork = 1;
	int pinned = 1;
	const char *out = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "n:w:m:o:u")) != -1) {
		switch (opt) {
		case 'n': n = atol(optarg); break;
		case 'w': w = atol(optarg); break;
		case 'm':
			if (strcmp(optarg, "fork") == 0)
				use_vfork = 0;
			else if (strcmp(optarg, "vfork") != 0)
				goto usage;
			break;
		case 'o': out = optarg; break;
		case 'u': pinned = 0; break;
		default: goto usage;
		}
	}
	if (n < 1 || w < 1 || w > 256 || optind != argc)
		goto usage;
	if (w > n)
		w = n;

	int *pids = mmap(NULL, n * sizeof(int), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pids == MAP_FAILED)
		die("mmap");
	memset(pids, 0, n * sizeof(int)); /* fault the pages in before the storm */

	int gate[2];
	if (pipe(gate) != 0)
		die("pipe");
	pid_t workers[256];
	for (long k = 0; k < w; k++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork worker");
		if (pid == 0) {
			close(gate[1]);
			_exit(worker(pids, n * k / w, n * (k + 1) / w, use_vfork, gate[0],
				     pinned ? k : -1));
		}
		workers[k] = pid;
	}
	close(gate[0]);
	usleep(100000); /* let every worker block on the gate */
	double t0 = now();
	close(gate[1]);
	int failed = 0;
	for (long k = 0; k < w; k++) {
		int st;
		while (waitpid(workers[k], &st, 0) < 0)
			if (errno != EINTR)
				die("waitpid worker");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	double elapsed = now() - t0;
	if (failed) {
		fprintf(stderr, "storm: a worker failed\n");
		return 1;
	}

	if (out) {
		FILE *f = fopen(out, "w");
		if (!f)
			die(out);
		for (long i = 0; i < n; i++)
			fprintf(f, "%d\n", pids[i]);
		if (fclose(f) != 0)
			die(out);
	}
	printf("children=%ld workers=%ld mode=%s pinned=%d elapsed=%.6f rate=%.1f worker_pids=",
	       n, w, use_vfork ? "vfork" : "fork", pinned, elapsed, n / elapsed);
	for (long k = 0; k < w; k++)
		printf(k ? ",%d" : "%d", (int)workers[k]);
	printf("\n");
	return 0;
usage:
	fprintf(stderr, "usage: storm [-n children] [-w workers] [-m vfork|fork] [-u] [-o pidfile]\n");
	return 2;
}
