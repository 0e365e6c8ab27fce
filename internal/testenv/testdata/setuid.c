//go:build ignore

// setuid: made setuid root by testenv.SetuidRoot, it becomes root in full
// (real, effective and saved uid and gid 0), the way su or sudo do, then
//   setuid hold        prints its pid and waits for a signal;
//   setuid exec ARGV   runs ARGV as root;
// or, as "setuid half", it only sets its effective uid back to its real
// one, keeping root as its saved uid (a program that dropped privileges
// for a while and can take them back), prints its pid and waits.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
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
