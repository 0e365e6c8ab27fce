package tracepoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/container"
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
)

// Layout of struct proc_ctx, which follows the event in fork and exec
// records when the source was opened WithExecPath (offsets from the
// context's start).
const (
	offCtx            = recordSize
	ctxCgroupID       = 0
	ctxSidStart       = 8
	ctxSidIno         = 16
	ctxPgidStart      = 24
	ctxPgidIno        = 32
	ctxUID            = 40
	ctxEUID           = 44
	ctxSUID           = 48
	ctxGID            = 52
	ctxEGID           = 56
	ctxSGID           = 60
	ctxLoginUID       = 64
	ctxAuditSession   = 68
	ctxSID            = 72
	ctxPGID           = 76
	ctxNSPid          = 80
	ctxPidNS          = 84
	ctxMntNS          = 88
	ctxTTYMajor       = 92
	ctxTTYMinor       = 96
	ctxNGroups        = 100
	ctxFlags          = 104
	ctxGroups         = 108
	ctxPad            = ctxGroups + 4*events.MaxGroups
	ctxSize           = ctxPad + 4
	forkRecordSize    = recordSize + ctxSize
	offArgc           = forkRecordSize
	offArgsSize       = offArgc + 4
	offArgsLen        = offArgc + 8
	offXFlags         = offArgc + 12
	offExeLen         = offArgc + 16
	offCwdLen         = offArgc + 18
	offCgroupLen      = offArgc + 20
	offCgtopLen       = offArgc + 22
	execFixedSize     = offArgc + 24
	ctxFlagTTY        = 1
	ctxFlagAudit      = 2
	ctxFlagSidLeader  = 4
	ctxFlagPgidLeader = 8
	ctxFlagStdTTY     = 16
)

// Flags of an exec record (X_* in bpf/process.bpf.c).
const (
	xArgsTrunc   = 1
	xExeTrunc    = 2
	xCwdTrunc    = 4
	xCgroupTrunc = 8
	xArgsFault   = 16
	xNoExe       = 32
	xSkipped     = 64
	xExeDeleted  = 128
	xCwdDeleted  = 256
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
	errRecordBlob = errors.New("record with inconsistent lengths")
)

// strs is where decode puts an exec's strings: its paths and arguments
// in b, the argument vector in argv, both reused from one exec to the
// next (see events.Event: valid until the source's next Read).
type strs struct {
	b    []byte
	argv []string
}

// decode fills ev from one ring buffer record. It checks the length, kind
// and pids before trusting anything and never panics. An exec's strings go
// to sc, which it reuses: nothing is allocated once sc has grown to the
// largest exec (a cgroup path cut at its bound that names a container by
// its top levels allocates that path). A record that fails the checks
// leaves ev unspecified.
func decode(b []byte, boot procfs.BootID, ev *events.Event, sc *strs) error {
	le := binary.LittleEndian
	if len(b) < recordSize {
		return fmt.Errorf("%w: %d bytes, want at least %d", errRecordSize, len(b), recordSize)
	}
	var kind events.Kind
	switch k := le.Uint32(b[offKind:]); k {
	case recFork:
		kind = events.Fork
		if len(b) != recordSize && len(b) != forkRecordSize {
			return fmt.Errorf("%w: fork of %d bytes, want %d or %d", errRecordSize, len(b), recordSize, forkRecordSize)
		}
	case recExec:
		kind = events.Exec
		if len(b) != recordSize && len(b) < execFixedSize {
			return fmt.Errorf("%w: exec of %d bytes, want %d or at least %d", errRecordSize, len(b), recordSize, execFixedSize)
		}
	case recExit:
		kind = events.Exit
		if len(b) != recordSize {
			return fmt.Errorf("%w: exit of %d bytes, want %d", errRecordSize, len(b), recordSize)
		}
	default:
		return fmt.Errorf("%w: %d", errRecordKind, k)
	}
	pid := int32(le.Uint32(b[offPid:]))
	tid := int32(le.Uint32(b[offTid:]))
	ppid := int32(le.Uint32(b[offPPid:]))
	if pid <= 0 || tid < 0 || ppid < 0 {
		return fmt.Errorf("%w: pid %d tid %d ppid %d", errRecordPid, pid, tid, ppid)
	}
	pidfs := le.Uint32(b[offFlags:])&flagPidfs != 0
	var ino, parentIno uint64
	if pidfs {
		ino = le.Uint64(b[offIno:])
		parentIno = le.Uint64(b[offParentIno:])
	}
	// Cleared, then filled in place: a composite literal assigned through
	// the pointer was built in a temporary and copied (576 bytes), a
	// quarter of an exit's decoding (BenchmarkDecode).
	*ev = events.Event{}
	ev.Kind, ev.Mechanism, ev.Pid, ev.PPid = kind, events.EBPF, pid, ppid
	ev.Token = token.Token{Boot: boot, Start: le.Uint64(b[offStart:]), Ino: ino, Prec: token.Ticks}
	ev.Time = le.Uint64(b[offTime:])
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
	if len(b) == recordSize {
		return nil
	}
	decodeCtx(b[offCtx:offCtx+ctxSize], boot, pidfs, &ev.Ctx)
	if kind == events.Exec {
		return decodeExec(b, ev, sc)
	}
	return nil
}

// decodeCtx fills c from a struct proc_ctx.
func decodeCtx(b []byte, boot procfs.BootID, pidfs bool, c *events.Context) {
	le := binary.LittleEndian
	u32 := func(off int) uint32 { return le.Uint32(b[off:]) }
	flags := u32(ctxFlags)
	*c = events.Context{} // then filled in place (see decode)
	c.Valid = true
	c.UID, c.EUID, c.SUID = u32(ctxUID), u32(ctxEUID), u32(ctxSUID)
	c.GID, c.EGID, c.SGID = u32(ctxGID), u32(ctxEGID), u32(ctxSGID)
	c.NGroups = int(u32(ctxNGroups))
	c.Audit, c.LoginUID, c.AuditSession = flags&ctxFlagAudit != 0, u32(ctxLoginUID), u32(ctxAuditSession)
	c.SID, c.PGID = int32(u32(ctxSID)), int32(u32(ctxPGID))
	c.TTY, c.StdTTY = flags&ctxFlagTTY != 0, flags&ctxFlagStdTTY != 0
	c.TTYMajor, c.TTYMinor = u32(ctxTTYMajor), u32(ctxTTYMinor)
	c.CgroupID = le.Uint64(b[ctxCgroupID:])
	c.NSPid, c.PidNS, c.MntNS = int32(u32(ctxNSPid)), u32(ctxPidNS), u32(ctxMntNS)
	for i := range min(c.NGroups, events.MaxGroups) {
		c.Groups[i] = u32(ctxGroups + 4*i)
	}
	leader := func(start, inoOff int) token.Token {
		var ino uint64
		if pidfs {
			ino = le.Uint64(b[inoOff:])
		}
		return token.Token{Boot: boot, Start: le.Uint64(b[start:]), Ino: ino, Prec: token.Ticks}
	}
	if flags&ctxFlagSidLeader != 0 {
		c.SessionLeader = leader(ctxSidStart, ctxSidIno)
	}
	if flags&ctxFlagPgidLeader != 0 {
		c.GroupLeader = leader(ctxPgidStart, ctxPgidIno)
	}
}

// decodeExec fills the exec part of ev from an exec record with context:
// the lengths must add up to the record's size exactly.
func decodeExec(b []byte, ev *events.Event, sc *strs) error {
	le := binary.LittleEndian
	exeLen := int(le.Uint16(b[offExeLen:]))
	cwdLen := int(le.Uint16(b[offCwdLen:]))
	cgLen := int(le.Uint16(b[offCgroupLen:]))
	topLen := int(le.Uint16(b[offCgtopLen:]))
	argsLen := int(le.Uint32(b[offArgsLen:]))
	if execFixedSize+exeLen+cwdLen+cgLen+topLen+argsLen != len(b) {
		return fmt.Errorf("%w: %d+%d+%d+%d+%d+%d bytes in a record of %d", errRecordBlob,
			execFixedSize, exeLen, cwdLen, cgLen, topLen, argsLen, len(b))
	}
	xf := le.Uint32(b[offXFlags:])
	x := &ev.Exec
	if xf&xSkipped != 0 {
		// Nothing read the blobs when the program ran (SetExecBlobs):
		// the executable, directory, cgroup and arguments are absent, not
		// empty; the context is there.
		if n := exeLen + cwdLen + cgLen + topLen + argsLen; n != 0 {
			return fmt.Errorf("%w: %d blob bytes in a record without blobs", errRecordBlob, n)
		}
		return nil
	}
	x.ArgsCount = int(le.Uint32(b[offArgc:]))
	x.ArgsSize = int(le.Uint32(b[offArgsSize:]))
	x.ArgsTruncated = xf&xArgsTrunc != 0
	x.ExeTruncated = xf&xExeTrunc != 0
	x.CwdTruncated = xf&xCwdTrunc != 0
	x.CgroupTruncated = xf&xCgroupTrunc != 0
	blob := b[execFixedSize:]
	exe, cwd, cg := blob[:exeLen], blob[exeLen:exeLen+cwdLen], blob[exeLen+cwdLen:exeLen+cwdLen+cgLen]
	top := blob[exeLen+cwdLen+cgLen : exeLen+cwdLen+cgLen+topLen]
	args := blob[exeLen+cwdLen+cgLen+topLen:]
	if xf&xArgsFault != 0 {
		args = nil
	}
	// One string holds the three paths and the arguments, in sc.b: a path
	// of n bytes of names takes at most n+1 bytes, so with room for them
	// all the appends never move the buffer under the string.
	need := exeLen + cwdLen + cgLen + 3 + len(args)
	buf := sc.b[:0]
	if cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	var ends [3]int
	for i, p := range [][]byte{exe, cwd, cg} {
		if i > 0 || xf&xNoExe == 0 {
			buf = appendPath(buf, p, (xf>>(i+1))&1 != 0)
		}
		ends[i] = len(buf)
	}
	buf = append(buf, args...)
	sc.b = buf
	var ps string
	if len(buf) > 0 {
		ps = unsafe.String(&buf[0], len(buf))
	}
	ev.Exe, x.Cwd, x.Cgroup = ps[:ends[0]], ps[ends[0]:ends[1]], ps[ends[1]:ends[2]]
	// A mark of a path that is not given (no program, a walk that kept
	// no name) would mark nothing.
	x.ExeDeleted = xf&xExeDeleted != 0 && ev.Exe != ""
	x.CwdDeleted = xf&xCwdDeleted != 0 && x.Cwd != ""
	var rt container.Runtime
	x.ContainerID, rt = containerID(x.Cgroup, x.CgroupTruncated, top)
	x.ContainerRuntime = string(rt)

	if len(args) > 0 {
		sc.argv = events.SplitArgStringInto(sc.argv, ps[ends[2]:])
		ev.Argv = sc.argv
	}
	return nil
}

// containerID derives the container id from the cgroup path, or, when the
// walk cut it, from the names it kept nearest the process (each whole) and
// then from the top levels the program read instead (top, names leaf first):
// container runtimes put their scopes near the root, so a process that
// nests cgroups past the walk's bound is not taken out of its container.
// Only the cut case allocates (the top's path).
func containerID(cgroup string, truncated bool, top []byte) (id string, rt container.Runtime) {
	if id, rt, ok := container.ID(cgroup); ok {
		return id, rt
	}
	if !truncated || len(top) == 0 {
		return "", ""
	}
	if id, rt, ok := container.ID(string(appendPath(nil, top, false))); ok {
		return id, rt
	}
	return "", ""
}

// appendPath writes the path whose names the program wrote leaf first,
// each NUL-terminated: "/" and the names root first, or, for a truncated
// walk, the names it reached without the leading slash.
func appendPath(b []byte, names []byte, truncated bool) []byte {
	names = bytes.TrimSuffix(names, []byte{0})
	if len(names) == 0 {
		if !truncated {
			b = append(b, '/')
		}
		return b
	}
	first := true
	for end := len(names); end >= 0; {
		start := bytes.LastIndexByte(names[:end], 0) + 1
		if !first || !truncated {
			b = append(b, '/')
		}
		first = false
		b = append(b, names[start:end]...)
		end = start - 1
	}
	return b
}
