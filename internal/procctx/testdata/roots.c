// roots runs a program where its /proc exe and cwd links read from
// another root than the process's (TestIntegrationFillRoots):
//
//	roots chroot DIR PATH ARG..     in a mount namespace of its own, bind /
//	                                at DIR, chroot to DIR, chdir to / and
//	                                run PATH (a path inside the root)
//	roots beyond DIR PATH ARG..     the same, but PATH is opened before the
//	                                chroot and run through its descriptor:
//	                                a program outside the process's root
//	roots detached MNT REL ARG..    in a mount namespace of its own, open
//	                                MNT/REL, chdir to its directory, detach
//	                                MNT (umount -l) and run the descriptor
//	roots memfd PATH ARG..          copy PATH into a memfd and run that
//	roots inroot DIR REL            chroot to DIR, chdir to REL inside it,
//	                                write "ready" and wait (no exec: the
//	                                program stays outside the root)
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static int ownns(void)
{
	return unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

static void run(int fd, char **argv)
{
	syscall(SYS_execveat, fd, "", argv, environ, AT_EMPTY_PATH);
	perror("execveat");
}

int main(int argc, char **argv)
{
	if (argc >= 5 && (!strcmp(argv[1], "chroot") || !strcmp(argv[1], "beyond"))) {
		int fd;

		if (ownns() || mount("/", argv[2], NULL, MS_BIND | MS_REC, NULL)) {
			perror("mount");
			return 100;
		}
		fd = open(argv[3], O_RDONLY | O_CLOEXEC);
		if (fd < 0 || chroot(argv[2]) || chdir("/")) {
			perror("chroot");
			return 100;
		}
		if (!strcmp(argv[1], "chroot"))
			execve(argv[3], &argv[4], environ);
		else
			run(fd, &argv[4]);
		perror("exec");
		return 100;
	}
	if (argc >= 5 && !strcmp(argv[1], "detached")) {
		char path[4096], dir[4096];
		int fd;

		snprintf(path, sizeof path, "%s/%s", argv[2], argv[3]);
		strcpy(dir, path);
		if (ownns()) {
			perror("mount namespace");
			return 100;
		}
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || chdir(dirname(dir)) || umount2(argv[2], MNT_DETACH)) {
			perror("detach");
			return 100;
		}
		run(fd, &argv[4]);
		return 100;
	}
	if (argc >= 4 && !strcmp(argv[1], "memfd")) {
		struct stat st;
		int in = open(argv[2], O_RDONLY | O_CLOEXEC);
		int fd = memfd_create("procctx-roots", MFD_CLOEXEC);

		if (in < 0 || fd < 0 || fstat(in, &st) || sendfile(fd, in, NULL, st.st_size) != st.st_size) {
			perror("memfd");
			return 100;
		}
		run(fd, &argv[3]);
		return 100;
	}
	if (argc == 4 && !strcmp(argv[1], "inroot")) {
		if (chroot(argv[2]) || chdir("/") || chdir(argv[3])) {
			perror("inroot");
			return 100;
		}
		printf("ready\n");
		fflush(stdout);
		pause();
		return 0;
	}
	fprintf(stderr, "usage: roots chroot|beyond DIR PATH ARG.. | detached MNT REL ARG.. | memfd PATH ARG.. | inroot DIR REL\n");
	return 2;
}
