// Package jobout bounds the output files of jobs, which their workloads
// write themselves, as their users, in a directory of the daemon's.
//
// The mechanism: Watch puts an inotify watch (IN_MODIFY) on the
// directory and, when a file in it is written, looks at how many
// bytes of it the disk holds (st_blocks). Past the bound and a slack, it
// frees the oldest: a hole punched from the start of the file up to the
// last max bytes (fallocate FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE), so
// the file keeps its size and every byte its offset, and a reader asks
// where the data starts (SEEK_DATA, see DataFrom). The job's descriptor is
// O_APPEND: it goes on writing at the end. Blocks allocated past the end
// (fallocate --keep-size) are freed by a truncate to the size. A
// filesystem that cannot punch (EOPNOTSUPP) has the file emptied instead
// (ftruncate to 0). Events are read in batches (batchGap apart: the
// runtime's poller wakes the watcher once for each batch, not each
// write), pending looks and the sweep come after every read, and the sweep forgets the
// files gone, so a busy directory neither starves a file nor grows the
// watcher's state past the directory's size.
//
// A file with a name outside the directory (a hard link its job made:
// protected_hardlinks lets a user link a file it may read and write) is
// taken back from its user when Bound finds it, and every file when the
// daemon gives it up (Discard): made root's, without ACL, mode 0, so that
// the link names a file its user can no longer open, which no bound and
// no disk quota of the user's would reach. Writes through the link tell
// the directory's watch nothing: the sweep finds it (sweepEvery).
//
// Limits: a process that holds the file open after the daemon removed
// it (the job's own, or one of its user's that opened /proc/PID/fd/1 of
// the job, or the file by a link before it was taken back) writes to a
// file no longer in the directory, unbounded, root's; a file
// is looked at most every minGap, so a writer faster than
// that runs past the bound by what it writes in between; writes through a
// shared mapping (mmap) tell inotify nothing, and are seen at the next
// sweep of every file (sweepEvery); inotify's queue can overflow
// (IN_Q_OVERFLOW), and then every file is looked at; a file a job owns
// may be leased by it (F_SETLEASE), and Bound's open then fails
// (EWOULDBLOCK) until the kernel has broken the lease (lease-break-time,
// 45 s by default), the file running past the bound meanwhile: GiveTo
// keeps the file root's, with an ACL entry for the job's user, except
// where the filesystem has no ACLs; there the file is its user's, and a
// daemon without CAP_DAC_OVERRIDE (the packaged unit) cannot open it to
// bound it: Watch reports each such failure (Reports.Failed). Holes the job made
// itself read as dropped too. A file is opened by name without following
// a symbolic link, and only a regular file is touched.
package jobout
