// Package quietfile writes to a regular file on a local filesystem without
// telling the Go runtime of the system call.
//
// The mechanism: a write through the runtime (os.File.Write) enters the
// system call with entersyscall, which wakes the runtime's sysmon thread
// when it sleeps; an awake sysmon then ticks every 20 µs for as long as
// any goroutine runs, and on a host where a thread's wake-up costs tens of
// µs (a PVM guest) those ticks cost more than the write. A process that
// idles between bursts of work (the daemon between two polls of its ring
// buffer) pays that at every burst in which it writes. Writer makes the
// write(2) call raw (syscall.RawSyscall) inside os.File's RawConn, which
// holds the descriptor for the call, so a concurrent Close cannot let its
// number be reused under the write.
//
// Limits: a raw call keeps its thread's P, and a stop-the-world waits for
// it. A write to the page cache of a local disk returns in microseconds,
// but one the kernel throttles for dirty pages can sleep (up to 200 ms a
// pause). So each call writes at most Chunk bytes, and after a call took
// longer than slowCall and slept (the thread's voluntary context switches,
// from getrusage, went up during it) the next loudFor of writes go through
// the runtime. A call that was only slow (preempted by other work on a
// busy host, or filling pages a VM's host had yet to back: 10 ms for
// 256 KiB was seen on this project's VM under an exec storm) keeps
// writes raw: through the runtime it would have cost as much CPU, and woke
// sysmon for the next 10 s on top (8% of the daemon's CPU in a storm).
// Only a regular file on a filesystem known to be local (ext2/3/4, XFS,
// btrfs, tmpfs, F2FS, overlayfs) gets a Writer: a file on NFS, CIFS or
// FUSE can wait on a server, a pipe or a terminal on its reader. Off Linux
// New always returns nil.
package quietfile
