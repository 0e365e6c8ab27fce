package tracepoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Layout of struct event in bpf/process.bpf.c. TestRecordLayout checks it
// against the bpf2go-generated processEvent.
const (
	offTime        = 0
	offStart       = 8
	offParentStart = 16
	offIno         = 24
	offParentIno   = 32
	offKind        = 40
	offPid         = 44
	offTid         = 48
	offPPid        = 52
	offStatus      = 56
	offFlags       = 60
	offComm        = 64
	recordSize     = 80

	// struct exec_event: an exec record followed by the execve path, sent
	// only when the source was opened WithExecPath.
	offFilename    = recordSize
	filenameLen    = 256
	execRecordSize = recordSize + filenameLen
)

// Record kinds (enum event_kind).
const (
	recFork = 1
	recExec = 2
	recExit = 3
)

// flagPidfs marks records whose inode ids are pidfs inode ids.
const flagPidfs = 1

var (
	errRecordSize = errors.New("record of wrong size")
	errRecordKind = errors.New("record of unknown kind")
	errRecordPid  = errors.New("record with invalid pid")
)

// decode fills ev from one ring buffer record. It checks the length, kind
// and pids before trusting anything and never panics. It does not allocate,
// except for Exe when an exec record carries the execve path. A record that
// fails the checks leaves ev unspecified.
func decode(b []byte, boot procfs.BootID, ev *events.Event) error {
	le := binary.LittleEndian
	if len(b) != recordSize && (len(b) != execRecordSize || le.Uint32(b[offKind:]) != recExec) {
		return fmt.Errorf("%w: %d bytes, want %d (%d for exec with path)", errRecordSize, len(b), recordSize, execRecordSize)
	}
	var kind events.Kind
	switch k := le.Uint32(b[offKind:]); k {
	case recFork:
		kind = events.Fork
	case recExec:
		kind = events.Exec
	case recExit:
		kind = events.Exit
	default:
		return fmt.Errorf("%w: %d", errRecordKind, k)
	}
	pid := int32(le.Uint32(b[offPid:]))
	tid := int32(le.Uint32(b[offTid:]))
	ppid := int32(le.Uint32(b[offPPid:]))
	if pid <= 0 || tid < 0 || ppid < 0 {
		return fmt.Errorf("%w: pid %d tid %d ppid %d", errRecordPid, pid, tid, ppid)
	}
	var ino, parentIno uint64
	if le.Uint32(b[offFlags:])&flagPidfs != 0 {
		ino = le.Uint64(b[offIno:])
		parentIno = le.Uint64(b[offParentIno:])
	}
	*ev = events.Event{
		Kind:      kind,
		Mechanism: events.EBPF,
		Pid:       pid,
		PPid:      ppid,
		Token:     token.Token{Boot: boot, Start: le.Uint64(b[offStart:]), Ino: ino, Prec: token.Ticks},
		Time:      le.Uint64(b[offTime:]),
	}
	if tid != pid {
		ev.Tid = tid
	}
	// The idle task (pid 0) is the parent of init and kthreadd: it has no
	// identity a token could name.
	if ppid > 0 {
		ev.ParentToken = token.Token{Boot: boot, Start: le.Uint64(b[offParentStart:]), Ino: parentIno, Prec: token.Ticks}
	}
	if kind == events.Exit {
		ev.Status = le.Uint32(b[offStatus:])
	}
	copy(ev.Comm[:], b[offComm:offComm+len(ev.Comm)])
	if len(b) == execRecordSize {
		path := b[offFilename:execRecordSize]
		if n := bytes.IndexByte(path, 0); n >= 0 {
			path = path[:n]
		}
		ev.Exe = string(path)
	}
	return nil
}
