//go:build ignore

// setuid: made setuid root by testenv.SetuidRoot, it becomes root in full
// (real, effective and saved uid and gid 0), the way su or sudo do, then
//   setuid hold        prints its pid and waits for a signal;
//   setuid exec ARGV   runs ARGV as root;
// or, as "setuid half", it only sets its effective uid back to its real
// one, keeping root as its saved uid (a program that dropped privileges
// for a while and can take them back), prints its pid and waits.
//
// It does any of that only while the test binary that built it runs:
// testenv compiles in that process's pid and start time (OWNER_PID,
// OWNER_START, clock ticks since boot, field 22 of /proc/PID/stat), and a
// copy left behind by a run that was killed exits with 77 instead.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if !defined(OWNER_PID) || !defined(OWNER_START)
#error "build with -DOWNER_PID=pid -DOWNER_START=ticks (testenv.SetuidRoot)"
#endif

// owner_runs reports whether the process OWNER_PID started at OWNER_START.
static int owner_runs(void) {
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)OWNER_PID);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	// The name, in parentheses, may hold anything: fields follow the last ')'.
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long start = 0;
	// After ") ": state (field 3), then fields 4..21, then starttime.
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &start) != 1)
		return 0;
	return start == (unsigned long long)OWNER_START;
}

int main(int argc, char **argv) {
	if (!owner_runs()) {
		fprintf(stderr, "setuid: the test binary that built this helper has ended\n");
		return 77;
	}
	if (argc >= 2 && strcmp(argv[1], "half") == 0) {
		if (seteuid(getuid()) != 0) {
			perror("seteuid");
			return 2;
		}
		printf("%d\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	if (setgid(0) != 0 || setuid(0) != 0) {
		perror("setuid");
		return 2;
	}
	if (argc >= 2 && strcmp(argv[1], "hold") == 0) {
		printf("%d\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	if (argc >= 3 && strcmp(argv[1], "exec") == 0) {
		execv(argv[2], argv + 2);
		perror("execv");
		return 2;
	}
	fprintf(stderr, "usage: setuid hold | setuid exec PATH ARGV...\n");
	return 64;
}
