// Package events defines the process events every mechanism delivers and the
// Source API in front of them: an eBPF tracepoint probe
// (internal/events/tracepoint), the netlink proc connector
// (internal/events/proccon), and the polling fallback (internal/fallback).
// Consumers never branch on which one runs; they read Mechanism from the
// events to say what decided a verdict. AppendJSON and AppendText write an
// event as one line without allocating; Writer prints a stream of them
// (the CLI's `events`), buffered and flushed every 100 ms.
//
// A Source is attached when it is opened, so events that happen while the
// caller scans /proc are buffered, not missed (attach, scan, drain). A
// mechanism that drops events reports it with a Lost event and counts it in
// Stats; the consumer then resyncs from /proc.
package events

import (
	"bytes"
	"errors"

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
	// Exe and Argv are set on Exec events by mechanisms that see them.
	Exe  string
	Argv []string
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
