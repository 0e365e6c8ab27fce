// Package procctx reads a process's exec context from /proc, for the
// mechanisms that see an exec but not what it was: the netlink proc
// connector and the /proc poller. The eBPF source captures the same
// context in the kernel at the exec itself (internal/events/tracepoint).
//
// Mechanism: /proc/PID is opened once as a directory and every file is read
// relative to that descriptor. The descriptor pins the process's struct pid,
// so once the process is reaped every read through it fails (ESRCH) rather
// than reading a newer process that took the pid. The stat file is read
// first, to check the start time against the event's token, and again last:
// when the last read succeeds, every read before it described the same
// instance. An exiting process gives back its memory (and with it its
// argument vector) before it turns zombie: a cmdline that took more than
// one read is read again at its first byte, and when that finds no memory
// the process gets no context, never a vector cut short by its exit. The
// executable and working directory are the paths the files have from the
// process's own root, as the eBPF source gives them: the " (deleted)" the
// kernel appends to an unlinked file's link is dropped, and the path marked
// deleted (ExecInfo.ExeDeleted, CwdDeleted), when the file has no links
// left (a memfd's "/memfd:NAME (deleted)" is no deleted file, and is not
// marked), a chroot's directory is taken off the front, and the path
// must lead from the process's root, through the dentry cache only
// (RESOLVE_CACHED: no lookup a hung mount could block), to the link's own
// file. One that does not (beyond the chroot, on a mount detached since, a
// memfd) is given as eBPF gives it: its names without the leading slash,
// marked cut. A path longer than PATH_MAX, whose link the kernel does not
// write (ENAMETOOLONG), is given as eBPF gives a path past its bound (4 KiB
// of names, 128 steps): the working directory's last names, found by a
// walk up from it (by "..", each name read from its parent's entries and
// proved by a lookup that leads back to it, crossing from a mount's root
// to its mountpoint), marked cut, or whole when the walk meets the
// process's root first (a chrooted process, whose path is shorter from its
// root); the executable's, when it is in the working directory (a program
// run as ./prog), that directory's path and its name there; otherwise no
// path, still marked cut (ExecInfo.ExeTruncated, CwdTruncated): the
// process has one, which is not known. The walk reads at most 64 KiB of
// directory entries and stops at a name it cannot find (a directory
// removed while in use, a covered mountpoint): it gives the names found.
//
// Limits: this reads after the fact, so it is a description of the process
// when it was read, not at the exec. A process already gone (or a zombie)
// gets no context at all (Context.Valid false, no argv, no paths), never
// its parent's or a successor's. What the process changed of itself between
// the exec and the read only the event stream can tell (the start time does
// not change): the tracker asks netlink (proccon.Source.Follows) after the
// read and drops what the kernel reported changed, all of it when the
// process exec'd again or when the look-ahead could not see the whole
// queue, the Context's ids when it changed them (setuid, setgid and kin),
// its session, group and terminal when it started a session (setsid), the
// name when it renamed itself. A
// process inside an exec, before the kernel sends the message, Fill reads
// as nothing (ErrInExec) when its tracer holds it there or the new
// program's arguments are not set up yet; the last microseconds of an exec
// (from the arguments' setup to the message) cannot be seen. What the kernel does not
// report is as read, not proven to be the exec's: the working directory
// (chdir), the arguments (a process may rewrite them in its memory), the
// supplementary groups (setgroups alone), the process group (setpgid
// alone), the cgroup and container (a move), the mount namespace (unshare
// or setns of one: Context.MntNS, read from ns/mnt), whether the program
// or the directory was unlinked (marked deleted when it was by the read,
// not necessarily by the exec), the audit login id (written once), whether the standard input and error are the terminal
// (interactive: a dup2 moves them). A process's own pid namespace and namespace pid do not change
// after its start (unshare and setns of a pid namespace apply to its
// children). Leader tokens are left zero (the lineage graph knows them);
// supplementary groups stop at events.MaxGroups.
package procctx

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// ErrGone reports a process that exited, or whose pid now names another
// instance, before its context could be read. The event then carries none.
var ErrGone = errors.New("process gone before its context was read")

// ErrInExec reports a process inside an exec: its tracer holds it there
// (a PTRACE_EVENT_EXEC stop), or it was read while the kernel loaded its
// new program, which is mapped before its arguments are set up. /proc may
// then show the program it is starting, whose own exec event the kernel
// has not sent yet. The event then carries no context.
var ErrInExec = errors.New("process held by its tracer inside an exec")

// ErrChanged reports a poller's event (events.Event.Inferred) whose
// process no longer has the name the snapshot gave it: it exec'd (or
// renamed itself) since, and /proc shows the later program, whose path,
// arguments and ids are not those of the process the event describes.
// The event then carries no context. (An exec of a program of the same
// name is not seen: the poller cannot tell.)
var ErrChanged = errors.New("process changed its program since the snapshot")

// errMalformed reports /proc content that does not parse.
var errMalformed = errors.New("malformed /proc content")

// parseStatus fills the ids of c from a /proc/PID/status file: the Uid,
// Gid, Groups and NSpid lines. The Uid and Gid lines are required.
func parseStatus(b []byte, c *events.Context) error {
	uids, err := procfs.ParseStatusUIDs(b)
	if err != nil {
		return err
	}
	c.UID, c.EUID, c.SUID = uids.Real, uids.Effective, uids.Saved
	val, ok := procfs.LineValue(b, "Gid:")
	var gids [3]uint32
	if !ok || !parseIDs(val, gids[:]) {
		return fmt.Errorf("status: Gid %q: %w", val, errMalformed)
	}
	c.GID, c.EGID, c.SGID = gids[0], gids[1], gids[2]
	c.NGroups = 0
	if val, ok := procfs.LineValue(b, "Groups:"); ok {
		for _, f := range bytes.Fields(val) {
			g, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return fmt.Errorf("status: Groups %q: %w", val, errMalformed)
			}
			if c.NGroups < events.MaxGroups {
				c.Groups[c.NGroups] = uint32(g)
			}
			c.NGroups++
		}
	}
	if _, ok := procfs.LineValue(b, "NSpid:"); ok {
		// Absent on kernels before 4.1; malformed is an error.
		ns, err := procfs.ParseStatusNSpid(b)
		if err != nil {
			return err
		}
		c.NSPid = ns[len(ns)-1]
	}
	return nil
}

// parseIDs parses the first len(out) fields of an id line.
func parseIDs(val []byte, out []uint32) bool {
	f := bytes.Fields(val)
	if len(f) < len(out) {
		return false
	}
	for i := range out {
		v, err := strconv.ParseUint(string(f[i]), 10, 32)
		if err != nil {
			return false
		}
		out[i] = uint32(v)
	}
	return true
}

// parseNSLink parses a namespace link's target ("pid:[4026531836]") into
// its inode.
func parseNSLink(s, kind string) (uint64, bool) {
	rest, ok := bytes.CutPrefix([]byte(s), []byte(kind+":["))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != ']' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 64)
	return v, err == nil
}

// parseID parses a decimal id file (loginuid, sessionid).
func parseID(b []byte) (uint32, bool) {
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 32)
	return uint32(v), err == nil
}

// ttyDev splits stat's tty_nr into the device's major and minor numbers,
// as the kernel encodes them (new_encode_dev).
func ttyDev(nr int32) (major, minor uint32) {
	v := uint32(nr)
	return (v >> 8) & 0xfff, (v & 0xff) | ((v >> 12) & 0xfff00)
}
