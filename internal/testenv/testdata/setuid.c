//go:build ignore

// setuid: made setuid root by testenv.SetuidRoot, it becomes root in full
// (real, effective and saved uid and gid 0), the way su or sudo do, then
//   setuid hold        prints its pid and waits for a signal;
//   setuid exec ARGV   runs ARGV as root.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
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
