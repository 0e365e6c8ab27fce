/*
 * target.c: the program an exec storm runs: a static binary without libc
 * that exits 0 at once, so that each exec costs what the kernel and the
 * observers spend on it and nothing more. Built by scripts/execstorm.sh with
 * gcc -static -nostdlib (x86-64 and arm64).
 */
void _start(void)
{
#if defined(__x86_64__)
	__asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
#elif defined(__aarch64__)
	__asm__ volatile("mov x8, #93\n\tmov x0, #0\n\tsvc #0");
#else
#error "target.c: add the exit system call of this architecture"
#endif
	for (;;)
		;
}
