// Package quietfile writes to a file, a pipe, a socket or a device
// without telling the Go runtime of the system call when the call cannot
// wait.
//
// The mechanism: a write through the runtime (os.File.Write) enters the
// system call with entersyscall, which wakes the runtime's sysmon thread
// when it sleeps; an awake sysmon then ticks every 20 µs for as long as
// any goroutine runs, and on a host where a thread's wake-up costs tens of
// µs (a PVM guest) those ticks cost more than the write. A process that
// idles between bursts of work (the daemon between two polls of its ring
// buffer) pays that at every burst in which it writes. Writer makes the
// call raw (syscall.RawSyscall) inside os.File's RawConn, which holds the
// descriptor for the call, so a concurrent Close cannot let its number be
// reused under the write.
//
// A regular file on a filesystem known to be local (ext2/3/4, XFS, btrfs,
// tmpfs, F2FS, overlayfs) is written with write(2). A write to the page
// cache of a local disk returns in microseconds, but one the kernel
// throttles for dirty pages can sleep (up to 200 ms a pause). So each
// call writes at most Chunk bytes, and after a call took longer than
// slowCall and slept (the thread's voluntary context switches, from
// getrusage, went up during it) the next loudFor of writes go through the
// runtime. A call that was only slow (preempted by other work on a busy
// host, or filling pages a VM's host had yet to back: 10 ms for 256 KiB
// was seen on this project's VM under an exec storm) keeps writes raw:
// through the runtime it would have cost as much CPU, and woke sysmon for
// the next 10 s on top (8% of the daemon's CPU in a storm). A file on
// NFS, CIFS or FUSE gets no Writer: it can wait on a server.
//
// A pipe or FIFO, a socket or a character device (the daemon's stdout
// under systemd is a socket to the journal, in a container a pipe) is
// written with pwritev2(RWF_NOWAIT), which copies what fits and never
// waits for the reader: when there is no room (EAGAIN) or the call fails,
// the rest goes through the runtime, which waits as it should and reports
// the error as it always did (a broken stdout still ends the process with
// SIGPIPE). A blocking pipe (a process's stdout) is first opened anew
// through /proc/self/fd, non-blocking: a description of its own, so that
// the flag changes nothing for the other processes that share the pipe,
// and in the runtime's poller, so that a full pipe is waited for there,
// with no system call the runtime must know of (in a storm the pipe is
// full at every batch). Close closes that description. The bytes are not
// cut in chunks, so a datagram socket still gets one message per write. A
// file the kernel cannot promise not to wait on refuses the flag
// (EOPNOTSUPP: a terminal) and is written through the runtime from then
// on. For wraps any io.Writer that is such a file.
//
// Limits: a raw call keeps its thread's P, and a stop-the-world waits for
// it: for a non-blocking write, as long as the copy into the buffer takes.
// Off Linux New always returns nil.
package quietfile
