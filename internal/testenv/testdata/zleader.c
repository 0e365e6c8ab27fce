//go:build ignore

// zleader: its main thread starts a second thread, prints the process's
// pid and exits with pthread_exit: /proc shows the process as a zombie
// (its leader's state) while the second thread runs on, until killed.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *run(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(void) {
	pthread_t t;
	if (pthread_create(&t, NULL, run, NULL) != 0) {
		perror("pthread_create");
		return 2;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	pthread_exit(NULL);
}
