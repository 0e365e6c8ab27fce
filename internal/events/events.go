// Package events defines the process events every mechanism delivers and the
// Source API in front of them: an eBPF tracepoint probe
// (internal/events/tracepoint), the netlink proc connector
// (internal/events/proccon), and the polling fallback (internal/fallback).
// Consumers never branch on which one runs; they read Mechanism from the
// events to say what decided a verdict. AppendJSON writes an event as one
// JSON line without allocating (human views are internal/view's).
//
// A Source is attached when it is opened, so events that happen while the
// caller scans /proc are buffered, not missed (attach, scan, drain). A
// mechanism that drops events reports it with a Lost event and counts it in
// Stats; the consumer then resyncs from /proc.
package events

import (
	"bytes"
	"errors"
	"strings"

	"github.com/procsupervisor/supervisor/internal/token"
)

// ErrClosed is returned by Read after Close: a clean shutdown, not a fault.
var ErrClosed = errors.New("event source closed")

// ErrUnavailable wraps the reason a mechanism cannot run on this host.
var ErrUnavailable = errors.New("mechanism unavailable")

// Kind is what happened to a process.
type Kind uint8

// Event kinds.
const (
	Fork Kind = iota + 1 // a new process (thread group) was created
	Exec                 // a process replaced its program
	Exit                 // the last thread of a process exited
	Lost                 // the mechanism dropped events; Count says how many if known
)

func (k Kind) String() string {
	switch k {
	case Fork:
		return "fork"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	case Lost:
		return "lost"
	}
	return "unknown"
}

// Mechanism names an event source. The values are stable: they appear in
// verdicts, logs and the CLI's --mechanism flag.
type Mechanism string

// Mechanisms.
const (
	EBPF       Mechanism = "ebpf"
	Netlink    Mechanism = "netlink"
	ProcPoll   Mechanism = "proc"   // polling /proc
	PSPoll     Mechanism = "ps"     // polling ps(1)
	SysctlPoll Mechanism = "sysctl" // polling kern.proc on macOS
)

// Event is one process lifecycle event. Sources fill a caller-owned Event in
// place (see Source.Read), so the hot path does not allocate.
type Event struct {
	Kind      Kind
	Mechanism Mechanism
	// Inferred marks an event a poller deduced from the difference of two
	// snapshots rather than observed as it happened.
	Inferred bool
	// Pid is the thread group id (the process id).
	Pid int32
	// Tid is the thread that triggered the event when it is not Pid (exec
	// from a non-leader thread, which then takes over Pid).
	Tid int32
	// PPid is the parent process: the creator for Fork, the current parent
	// otherwise (0 when unknown).
	PPid int32
	// Token identifies the instance at Pid. Ino is 0 when the mechanism
	// cannot see the pidfs inode; the whole Token is zero when the start
	// time could not be learned (the process was already gone).
	Token       token.Token
	ParentToken token.Token
	Comm        [16]byte
	// Status is the kernel's exit status for Exit (as wait(2) encodes it).
	Status uint32
	// Time is when the event happened, in nanoseconds of CLOCK_BOOTTIME,
	// 0 when unknown.
	Time uint64
	// Count is the number of events lost for Lost, 0 when unknown.
	Count uint64
	// Exe and Argv are set on Exec events by mechanisms that see them. Exe
	// is the absolute path of the file the kernel runs (resolved, never
	// argv[0] nor the string given to execve) when Exec.ExeTruncated is
	// unset; Argv is the argument vector as the process received it.
	// Sources leave them unset on Fork and Exit: the consumer's exec cache
	// sets them there to the image the process runs, when it knows it
	// (internal/execcache), with the marks of Exec that describe it.
	//
	// Exe, Argv and the strings of Exec may point into memory the source
	// reuses for its next event (the eBPF source decodes every exec into
	// one buffer, so that an exec storm allocates nothing): they are valid
	// until the next Read of the source. A consumer that keeps any of them
	// past its handling of the event keeps a copy (Clone).
	Exe  string
	Argv []string
	// Exec is the rest of what an exec captured, set with Exe and Argv.
	Exec ExecInfo
	// Ctx is who and where the process is: as inherited for Fork, as the
	// new program starts for Exec. Ctx.Valid is false when the mechanism
	// does not capture it.
	Ctx Context
	// KnownUID is the real uid the consumer's exec cache last knew for
	// the instance (from its exec, or at its fork from its parent's),
	// set (KnownUIDOK) only when Ctx carries no ids: an eBPF exit, a
	// netlink fork. A feed charges the event to that user's share; it is
	// never shown as the process's uid, which a setuid(2), no event, may
	// have changed since.
	KnownUID   uint32
	KnownUIDOK bool
	// Parent describes the process (PPid, ParentToken) as its last exec
	// seen showed it, nil when that exec was not seen. Sources never set
	// it: the consumer's exec cache does (internal/execcache), and it is
	// valid only until the next event is read. It is read-only: it points
	// into the cache's (or the tracker's) own memory.
	Parent *Desc
}

// Desc is what the exec of one process instance showed, kept for the
// events of its children: its comm, executable, arguments and working
// directory, and its context, refreshed from each fork it makes (a child
// inherits its creator's ids, terminal and groups at the fork).
type Desc struct {
	Comm [16]byte
	Exe  string
	Argv []string
	Exec ExecInfo
	Ctx  Context
}

// ExecInfo is what an exec captured beside Exe and Argv. Its strings, as
// an Event's, may be valid only until the source's next Read.
type ExecInfo struct {
	// Cwd is the absolute working directory at exec ("" when unknown).
	Cwd string
	// Cgroup is the cgroup2 path of the process, from the hierarchy's root
	// ("" when unknown), and ContainerID the container id derived from it
	// (see internal/container), "" when it is no container's, with
	// ContainerRuntime the runtime whose layout named it (container.Runtime).
	// When the path is cut (CgroupTruncated), the id may come from its top
	// levels, which a mechanism read beside it, rather than from Cgroup.
	Cgroup           string
	ContainerID      string
	ContainerRuntime string
	// ArgsCount and ArgsSize are the argument count and bytes (NULs
	// included) the process received: when ArgsTruncated is set, Argv holds
	// only the first bytes of them (its last element possibly cut).
	ArgsCount     int
	ArgsSize      int
	ArgsTruncated bool
	// ArgsRedacted marks an Argv in which a redaction pattern replaced
	// something (internal/redact): Argv is then not what the process
	// received, ArgsCount and ArgsSize still are.
	ArgsRedacted bool
	// ArgsWithheld marks a description whose Argv a consumer cut
	// further than its bound (a log feed, for a user over its byte
	// share): ArgsCount and ArgsSize still say what the process
	// received. Sources never set it.
	ArgsWithheld bool
	// ExeTruncated, CwdTruncated and CgroupTruncated mark a path whose walk
	// stopped at a bound, or (executable and directory) never met the
	// process's root (beyond its chroot, on a detached mount): the string
	// is then the path's last components, without a leading slash, never a
	// wrong absolute path. A program run from a memfd has no path: its
	// Exe is its name, memfd:NAME (NAME as the creator chose it, which
	// may hold slashes), marked truncated.
	ExeTruncated    bool
	CwdTruncated    bool
	CgroupTruncated bool
	// ExeDeleted and CwdDeleted mark an executable or working directory
	// whose name was unlinked (fexecve of a deleted file, a directory
	// removed while in use: what /proc shows with " (deleted)"), at the
	// exec for eBPF, by the read of /proc for netlink and polling: Exe or
	// Cwd is then the last name it had, which another file may hold now.
	// A memfd's name is not marked: it never had a path.
	ExeDeleted bool
	CwdDeleted bool
	// OtherIDs marks an image whose exec's ids are not proven to be the
	// ones the event or description carries: one the exec cache lent (a
	// fork runs its parent's image, exec'd by whoever exec'd it) or kept
	// from an exec whose ids differ from those refreshed since (a
	// setuid(2) is no event), or whose ids were not read. Its arguments
	// are those of that exec, which whoever runs it now may never have
	// been able to read (a root program that overwrote a password on its
	// command line, then dropped to a user and forked).
	OtherIDs bool
	// Image is the number the consumer's exec cache gave the image (the
	// executable, the arguments and their marks) when it kept it: the same
	// on every event and description that carries that image, never given
	// to another within the cache's life; 0 when the cache keeps none. An
	// encoder may keep the text it wrote for an image's arguments under
	// it, checked against the argument vector it is given (a consumer
	// that withholds the arguments leaves the number as it was).
	Image uint64
}

// MaxGroups is how many supplementary groups a Context holds.
const MaxGroups = 16

// Context is who and where a process is, read by the kernel at the event.
// Ids are as the host sees them (the initial user and pid namespaces),
// except NSPid.
type Context struct {
	// Valid is set when the context was read; Absent then names the parts
	// that are not known all the same (their fields are zero).
	Valid  bool
	Absent CtxPart
	// Real, effective and saved user and group ids.
	UID, EUID, SUID uint32
	GID, EGID, SGID uint32
	// Groups holds the first min(NGroups, MaxGroups) supplementary groups.
	Groups  [MaxGroups]uint32
	NGroups int
	// LoginUID and AuditSession are the audit login uid and session id
	// (0xffffffff when unset), valid when Audit is set.
	Audit        bool
	LoginUID     uint32
	AuditSession uint32
	// SID and PGID are the session and process group ids; SessionLeader and
	// GroupLeader the tokens of the processes leading them, zero when the
	// leader is gone.
	SID, PGID     int32
	SessionLeader token.Token
	GroupLeader   token.Token
	// TTY is set when the process has a controlling terminal, whose
	// device numbers are TTYMajor and TTYMinor; StdTTY when its stdin and
	// stderr are that terminal.
	TTY, StdTTY        bool
	TTYMajor, TTYMinor uint32
	// CgroupID is the cgroup2 id of the process (its directory's inode).
	CgroupID uint64
	// NSPid is the pid in the process's own pid namespace, whose inode is
	// PidNS.
	NSPid int32
	PidNS uint32
	// MntNS is the inode of the process's mount namespace (0 when it
	// could not be read), in which Exe and Exec.Cwd are paths: a
	// process in a private one (unshare -m, which any user may run in a
	// user namespace of its own; a container) may have bound any file
	// or directory on any name.
	MntNS uint32
	// Undumpable is set when /proc showed the process not dumpable as
	// its context was read (its /proc directory owned by root, not by
	// its effective ids): one that changed its ids without an exec (a
	// root program that dropped to a user, whose uid change the source
	// did not see), or made itself so (PR_SET_DUMPABLE). Even its own
	// user may not read its executable, working directory or
	// descriptors in /proc. Read by netlink and polling; eBPF's context
	// is the exec's ids themselves.
	Undumpable bool
}

// CtxPart names a part of a Context that a source can know to be absent
// while the rest is known: netlink and polling read the context from /proc
// after the exec, and when the kernel reports that the process changed a
// part of it in between, that part is no longer the exec's.
type CtxPart uint8

const (
	// CtxIDs: the real, effective and saved user and group ids and the
	// supplementary groups (a setuid, setgid or kin after the exec; the
	// groups go with them: a privilege drop sets them first).
	CtxIDs CtxPart = 1 << iota
	// CtxSession: the session and process group ids, their leaders, the
	// controlling terminal and whether the process is interactive (a
	// setsid after the exec).
	CtxSession
	// CtxCgroup: the cgroup id (a cgroup path longer than /proc/PID/cgroup
	// gives, PATH_MAX, cut there and naming no cgroup, or another).
	CtxCgroup
	// CtxName: the event's process name (Comm), which the source read
	// after the process renamed itself or went into another exec.
	CtxName
	// CtxExe and CtxCwd: the executable's path and the working directory
	// (Exe, ExecInfo.Cwd), whose /proc links could not be read.
	CtxExe
	CtxCwd
)

// ctxOwn is the parts a Context holds itself; the others name fields of
// the event around it.
const ctxOwn = CtxIDs | CtxSession | CtxCgroup

// ctxParts lists every CtxPart with its name, in the order encoders give
// them ("ids", "session", "cgroup", "name", "exe", "cwd").
var ctxParts = [...]struct {
	Part CtxPart
	Name string
}{{CtxIDs, "ids"}, {CtxSession, "session"}, {CtxCgroup, "cgroup"}, {CtxName, "name"}, {CtxExe, "exe"}, {CtxCwd, "cwd"}}

// Has reports whether c holds part p.
func (c *Context) Has(p CtxPart) bool { return c.Valid && c.Absent&p == 0 }

// Complete reports whether c holds every part.
func (c *Context) Complete() bool { return c.Valid && c.Absent&ctxOwn == 0 }

// Drop marks part p of c absent and zeroes its fields, so that no stale
// value is left to read.
func (c *Context) Drop(p CtxPart) {
	if !c.Valid {
		return
	}
	c.Absent |= p
	if p&CtxIDs != 0 {
		c.UID, c.EUID, c.SUID, c.GID, c.EGID, c.SGID = 0, 0, 0, 0, 0, 0
		c.Groups, c.NGroups = [MaxGroups]uint32{}, 0
	}
	if p&CtxSession != 0 {
		c.SID, c.PGID, c.SessionLeader, c.GroupLeader = 0, 0, token.Token{}, token.Token{}
		c.TTY, c.StdTTY, c.TTYMajor, c.TTYMinor = false, false, 0, 0
	}
	if p&CtxCgroup != 0 {
		c.CgroupID = 0
	}
}

// Interactive reports whether the process's stdin and stderr are its
// controlling terminal: ECS's process.interactive.
func (c *Context) Interactive() bool { return c.Has(CtxSession) && c.TTY && c.StdTTY }

// UnsetID is the audit login uid and session id of a process that has none.
const UnsetID = 0xffffffff

// Clone returns a copy of e that shares no memory with it: its strings and
// argument vector, and its Parent's, copied (Parent itself a copy). A
// consumer that keeps an event past the source's next Read keeps a clone.
func (e *Event) Clone() Event {
	c := *e
	c.Exe, c.Argv = strings.Clone(e.Exe), cloneArgv(e.Argv)
	c.Exec.clone()
	if e.Parent != nil {
		p := e.Parent.Clone()
		c.Parent = &p
	}
	return c
}

// Clone returns a copy of d that shares no memory with it.
func (d *Desc) Clone() Desc {
	c := *d
	c.Exe, c.Argv = strings.Clone(d.Exe), cloneArgv(d.Argv)
	c.Exec.clone()
	return c
}

// clone replaces x's strings by copies.
func (x *ExecInfo) clone() {
	x.Cwd, x.Cgroup = strings.Clone(x.Cwd), strings.Clone(x.Cgroup)
	x.ContainerID, x.ContainerRuntime = strings.Clone(x.ContainerID), strings.Clone(x.ContainerRuntime)
}

// cloneArgv copies argv and its strings (nil stays nil).
func cloneArgv(argv []string) []string {
	if argv == nil {
		return nil
	}
	c := make([]string, len(argv))
	for i, a := range argv {
		c[i] = strings.Clone(a)
	}
	return c
}

// CommString returns Comm without its NUL padding.
func (e *Event) CommString() string {
	n := bytes.IndexByte(e.Comm[:], 0)
	if n < 0 {
		n = len(e.Comm)
	}
	return string(e.Comm[:n])
}

// Exited reports whether an Exit status is a normal exit, and its code.
func (e *Event) Exited() (code int, ok bool) {
	if e.Status&0x7f == 0 {
		return int(e.Status>>8) & 0xff, true
	}
	return 0, false
}

// Signaled reports whether an Exit status is death by a signal, and which.
func (e *Event) Signaled() (sig int, ok bool) {
	s := e.Status & 0x7f
	if s != 0 && s != 0x7f {
		return int(s), true
	}
	return 0, false
}

// Stats counts what a source delivered and what it lost.
type Stats struct {
	Events       uint64 // events delivered by Read
	Lost         uint64 // events the mechanism dropped (known or estimated)
	LostReports  uint64 // Lost events delivered
	DecodeErrors uint64 // records that did not decode; counted, skipped
}

// Source is one mechanism delivering process events. Implementations are
// attached by their constructor; Read is called from one goroutine; Close
// may be called from any goroutine and makes a blocked Read return
// ErrClosed.
type Source interface {
	Mechanism() Mechanism
	// Read blocks until the next event and fills ev. It returns ErrClosed
	// after Close. A record that fails to decode is counted and skipped,
	// not returned.
	Read(ev *Event) error
	Stats() Stats
	Close() error
}
