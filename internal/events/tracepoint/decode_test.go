package tracepoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// record is a test-side description of one ring buffer record.
type record struct {
	time, start, parentStart, ino, parentIno uint64
	kind                                     uint32
	pid, tid, ppid                           int32
	status, flags                            uint32
	comm                                     string
}

// execRec is a test-side description of an exec record with context.
type execRec struct {
	record
	ctx                   ctxRec
	argc, argsSize        uint32
	xflags                uint32
	exe, cwd, cgroup, arg string // blobs as the program writes them
	cgtop                 string // the cut cgroup path's top levels
}

// ctxRec is a test-side struct proc_ctx.
type ctxRec struct {
	cgroupID, sidStart, sidIno, pgidStart, pgidIno uint64
	ids                                            [6]uint32 // uid euid suid gid egid sgid
	loginuid, auditSession                         uint32
	sid, pgid, nsPid                               int32
	pidNS, mntNS, ttyMajor, ttyMinor, ngroups      uint32
	flags                                          uint32
	groups                                         []uint32
}

func (c ctxRec) encode() []byte {
	b := make([]byte, ctxSize)
	le := binary.LittleEndian
	le.PutUint64(b[ctxCgroupID:], c.cgroupID)
	le.PutUint64(b[ctxSidStart:], c.sidStart)
	le.PutUint64(b[ctxSidIno:], c.sidIno)
	le.PutUint64(b[ctxPgidStart:], c.pgidStart)
	le.PutUint64(b[ctxPgidIno:], c.pgidIno)
	for i, off := range []int{ctxUID, ctxEUID, ctxSUID, ctxGID, ctxEGID, ctxSGID} {
		le.PutUint32(b[off:], c.ids[i])
	}
	le.PutUint32(b[ctxLoginUID:], c.loginuid)
	le.PutUint32(b[ctxAuditSession:], c.auditSession)
	le.PutUint32(b[ctxSID:], uint32(c.sid))
	le.PutUint32(b[ctxPGID:], uint32(c.pgid))
	le.PutUint32(b[ctxNSPid:], uint32(c.nsPid))
	le.PutUint32(b[ctxPidNS:], c.pidNS)
	le.PutUint32(b[ctxMntNS:], c.mntNS)
	le.PutUint32(b[ctxTTYMajor:], c.ttyMajor)
	le.PutUint32(b[ctxTTYMinor:], c.ttyMinor)
	le.PutUint32(b[ctxNGroups:], c.ngroups)
	le.PutUint32(b[ctxFlags:], c.flags)
	for i, g := range c.groups {
		le.PutUint32(b[ctxGroups+4*i:], g)
	}
	return b
}

// encodeFork lays r out as struct fork_event.
func (r record) encodeFork(c ctxRec) []byte { return append(r.encode(), c.encode()...) }

// encode lays x out as struct exec_event and its blobs.
func (x execRec) encode() []byte {
	b := append(x.record.encode(), x.ctx.encode()...)
	b = append(b, make([]byte, execFixedSize-forkRecordSize)...)
	le := binary.LittleEndian
	le.PutUint32(b[offArgc:], x.argc)
	le.PutUint32(b[offArgsSize:], x.argsSize)
	le.PutUint32(b[offArgsLen:], uint32(len(x.arg)))
	le.PutUint32(b[offXFlags:], x.xflags)
	le.PutUint16(b[offExeLen:], uint16(len(x.exe)))
	le.PutUint16(b[offCwdLen:], uint16(len(x.cwd)))
	le.PutUint16(b[offCgroupLen:], uint16(len(x.cgroup)))
	le.PutUint16(b[offCgtopLen:], uint16(len(x.cgtop)))
	return append(append(append(append(append(b, x.exe...), x.cwd...), x.cgroup...), x.cgtop...), x.arg...)
}

// encode lays r out as bpf/process.bpf.c's struct event.
func (r record) encode() []byte {
	b := make([]byte, recordSize)
	le := binary.LittleEndian
	le.PutUint64(b[offTime:], r.time)
	le.PutUint64(b[offStart:], r.start)
	le.PutUint64(b[offParentStart:], r.parentStart)
	le.PutUint64(b[offIno:], r.ino)
	le.PutUint64(b[offParentIno:], r.parentIno)
	le.PutUint32(b[offKind:], r.kind)
	le.PutUint32(b[offPid:], uint32(r.pid))
	le.PutUint32(b[offTid:], uint32(r.tid))
	le.PutUint32(b[offPPid:], uint32(r.ppid))
	le.PutUint32(b[offStatus:], r.status)
	le.PutUint32(b[offFlags:], r.flags)
	copy(b[offComm:offComm+16], r.comm)
	return b
}

var testBoot = procfs.BootID{0x8a, 0x3f, 0x11, 0x02, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8}

func tok(start, ino uint64) token.Token {
	return token.Token{Boot: testBoot, Start: start, Ino: ino, Prec: token.Ticks}
}

func TestDecode(t *testing.T) {
	fork := record{time: 99, start: 500, parentStart: 400, ino: 7001, parentIno: 7000,
		kind: recFork, pid: 42, tid: 42, ppid: 41, flags: flagPidfs, comm: "bash"}
	execThread := record{time: 100, start: 500, parentStart: 400, ino: 7001, parentIno: 7000,
		kind: recExec, pid: 42, tid: 45, ppid: 41, flags: flagPidfs, comm: "true"}
	exit := record{time: 101, start: 500, parentStart: 400, ino: 7001, parentIno: 7000,
		kind: recExit, pid: 42, tid: 42, ppid: 1, status: 3 << 8, flags: flagPidfs, comm: "0123456789abcdef"}
	noPidfs := fork
	noPidfs.flags = 0
	initExec := record{start: 0, kind: recExec, pid: 1, tid: 1, ppid: 0, flags: flagPidfs, ino: 2, parentIno: 0}
	statusOnFork := fork
	statusOnFork.status = 9

	ctx := ctxRec{cgroupID: 77, sidStart: 300, sidIno: 6000, pgidStart: 310, pgidIno: 6010,
		ids: [6]uint32{1000, 0, 1001, 100, 101, 102}, loginuid: 1000, auditSession: 4,
		sid: 30, pgid: 31, nsPid: 1, pidNS: 4026532000, mntNS: 4026532001, ttyMajor: 136, ttyMinor: 3,
		ngroups: 20, flags: ctxFlagTTY | ctxFlagStdTTY | ctxFlagAudit | ctxFlagSidLeader | ctxFlagPgidLeader,
		groups: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	wantCtx := events.Context{Valid: true, UID: 1000, EUID: 0, SUID: 1001, GID: 100, EGID: 101, SGID: 102,
		Groups: [16]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, NGroups: 20,
		Audit: true, LoginUID: 1000, AuditSession: 4, SID: 30, PGID: 31,
		SessionLeader: tok(300, 6000), GroupLeader: tok(310, 6010),
		TTY: true, StdTTY: true, TTYMajor: 136, TTYMinor: 3, CgroupID: 77, NSPid: 1, PidNS: 4026532000, MntNS: 4026532001}
	noLeaders := ctx
	noLeaders.flags = 0
	noLeaders.ngroups = 2
	wantNoLeaders := events.Context{Valid: true, UID: 1000, EUID: 0, SUID: 1001, GID: 100, EGID: 101, SGID: 102,
		Groups: [16]uint32{1, 2}, NGroups: 2, LoginUID: 1000, AuditSession: 4, SID: 30, PGID: 31,
		TTYMajor: 136, TTYMinor: 3, CgroupID: 77, NSPid: 1, PidNS: 4026532000, MntNS: 4026532001}
	execPath := execThread
	execPath.tid = 42
	const cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	full := execRec{record: execPath, ctx: ctx, argc: 4, argsSize: 17,
		exe: "true\x00bin\x00usr\x00", cwd: "", cgroup: "docker-" + cid + ".scope\x00system.slice\x00",
		arg: "true\x00\x00a b\x00x\ny\x00"}
	truncated := execRec{record: execPath, ctx: ctx, argc: 3, argsSize: 9000, xflags: xArgsTrunc | xCwdTrunc | xCgroupTrunc,
		exe: "sh\x00bin\x00", cwd: "c\x00b\x00", cgroup: "docker-" + cid + ".scope\x00",
		arg: "sh\x00-c\x00ech"}
	// Cut below the scope: the top levels name the container, the
	// innermost scope kept in the cut path wins over them.
	deepCgroup := execRec{record: execPath, ctx: ctx, argc: 1, argsSize: 3, xflags: xCgroupTrunc,
		exe: "sh\x00bin\x00", cwd: "", cgroup: "n9\x00n8\x00", cgtop: "n1\x00n0\x00docker-" + cid + ".scope\x00system.slice\x00",
		arg: "sh\x00"}
	const inner = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	nestedCgroup := deepCgroup
	nestedCgroup.cgroup = "n9\x00libpod-" + inner + ".scope\x00"
	topNotCut := deepCgroup
	topNotCut.xflags = 0
	noExe := execRec{record: execPath, ctx: noLeaders, argc: 0, xflags: xNoExe | xArgsFault, cwd: "tmp\x00"}
	skipped := execRec{record: execPath, ctx: ctx, argc: 4, xflags: xSkipped}
	deleted := execRec{record: execPath, ctx: ctx, argc: 1, argsSize: 3, xflags: xExeDeleted | xCwdDeleted,
		exe: "prog\x00tmp\x00", cwd: "gone\x00tmp\x00", cgroup: "", arg: "sh\x00"}
	// A deleted program beyond the walk's reach: both marks.
	deletedCut := deleted
	deletedCut.xflags = xExeDeleted | xExeTrunc
	// The program's flag means nothing without a program.
	deletedNoExe := deleted
	deletedNoExe.xflags, deletedNoExe.exe = xExeDeleted|xNoExe, ""
	skippedBlobs := execRec{record: execPath, ctx: ctx, argc: 4, xflags: xSkipped, cwd: "tmp\x00"}
	badLen := full.encode()
	badLen[offArgsLen]++
	wantFull := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
		Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100,
		Exe: "/usr/bin/true", Argv: []string{"true", "", "a b", "x\ny"}, Ctx: wantCtx,
		Exec: events.ExecInfo{Cwd: "/", Cgroup: "/system.slice/docker-" + cid + ".scope", ContainerID: cid, ContainerRuntime: "docker",
			ArgsCount: 4, ArgsSize: 17}}
	wantTrunc := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
		Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100,
		Exe: "/bin/sh", Argv: []string{"sh", "-c", "ech"}, Ctx: wantCtx,
		Exec: events.ExecInfo{Cwd: "b/c", Cgroup: "docker-" + cid + ".scope", ContainerID: cid, ContainerRuntime: "docker",
			ArgsCount: 3, ArgsSize: 9000, ArgsTruncated: true, CwdTruncated: true, CgroupTruncated: true}}
	wantDeep := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
		Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100,
		Exe: "/bin/sh", Argv: []string{"sh"}, Ctx: wantCtx,
		Exec: events.ExecInfo{Cwd: "/", Cgroup: "n8/n9", ContainerID: cid, ContainerRuntime: "docker", ArgsCount: 1, ArgsSize: 3, CgroupTruncated: true}}
	wantNested := wantDeep
	wantNested.Exec.Cgroup, wantNested.Exec.ContainerID, wantNested.Exec.ContainerRuntime = "libpod-"+inner+".scope/n9", inner, "podman"
	wantNotCut := wantDeep
	wantNotCut.Exec.Cgroup, wantNotCut.Exec.ContainerID, wantNotCut.Exec.ContainerRuntime, wantNotCut.Exec.CgroupTruncated = "/n8/n9", "", "", false
	wantNoExe := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
		Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100,
		Ctx: wantNoLeaders, Exec: events.ExecInfo{Cwd: "/tmp", Cgroup: "/"}}
	wantDeleted := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
		Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100,
		Exe: "/tmp/prog", Argv: []string{"sh"}, Ctx: wantCtx,
		Exec: events.ExecInfo{Cwd: "/tmp/gone", Cgroup: "/", ArgsCount: 1, ArgsSize: 3, ExeDeleted: true, CwdDeleted: true}}
	wantDeletedCut := wantDeleted
	wantDeletedCut.Exe, wantDeletedCut.Exec.ExeTruncated, wantDeletedCut.Exec.CwdDeleted = "tmp/prog", true, false
	wantDeletedNoExe := wantDeleted
	wantDeletedNoExe.Exe, wantDeletedNoExe.Exec.ExeDeleted, wantDeletedNoExe.Exec.CwdDeleted = "", false, false
	wantForkCtx := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: 42, PPid: 41,
		Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("bash"), Time: 99, Ctx: wantCtx}

	tests := []struct {
		name string
		b    []byte
		want events.Event
		err  error
	}{
		{"exec with context", full.encode(), wantFull, nil},
		{"exec truncated", truncated.encode(), wantTrunc, nil},
		{"exec with a cgroup cut below the scope", deepCgroup.encode(), wantDeep, nil},
		{"exec with a cgroup cut below an inner scope", nestedCgroup.encode(), wantNested, nil},
		{"exec with top levels but a whole cgroup", topNotCut.encode(), wantNotCut, nil},
		{"exec without exe and args", noExe.encode(), wantNoExe, nil},
		{"exec of a deleted program from a removed directory", deleted.encode(), wantDeleted, nil},
		{"exec of a deleted program beyond the walk", deletedCut.encode(), wantDeletedCut, nil},
		{"exec deleted without a program", deletedNoExe.encode(), wantDeletedNoExe, nil},
		{"exec with lengths that do not add up", badLen, events.Event{}, errRecordBlob},
		{"exec without blobs", skipped.encode(), events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100, Ctx: wantCtx}, nil},
		{"exec without blobs that has some", skippedBlobs.encode(), events.Event{}, errRecordBlob},
		{"exec cut short", full.encode()[:execFixedSize-1], events.Event{}, errRecordSize},
		{"fork with context", fork.encodeFork(ctx), wantForkCtx, nil},
		{"fork with exec size", append(fork.encodeFork(ctx), make([]byte, execFixedSize-forkRecordSize)...), events.Event{}, errRecordSize},
		{"exit with context", exit.encodeFork(ctx), events.Event{}, errRecordSize},
		{"fork", fork.encode(), events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: 42, PPid: 41,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("bash"), Time: 99}, nil},
		{"exec from thread", execThread.encode(), events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, Tid: 45, PPid: 41,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100}, nil},
		{"exit", exit.encode(), events.Event{Kind: events.Exit, Mechanism: events.EBPF, Pid: 42, PPid: 1,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("0123456789abcdef"), Status: 3 << 8, Time: 101}, nil},
		{"no pidfs", noPidfs.encode(), events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: 42, PPid: 41,
			Token: tok(500, 0), ParentToken: tok(400, 0), Comm: comm("bash"), Time: 99}, nil},
		{"init has no parent token", initExec.encode(), events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 1,
			Token: tok(0, 2)}, nil},
		{"status only on exit", statusOnFork.encode(), events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: 42, PPid: 41,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("bash"), Time: 99}, nil},
		{"empty", nil, events.Event{}, errRecordSize},
		{"truncated", fork.encode()[:recordSize-1], events.Event{}, errRecordSize},
		{"too long", append(fork.encode(), 0), events.Event{}, errRecordSize},
		{"kind zero", record{kind: 0, pid: 1}.encode(), events.Event{}, errRecordKind},
		{"kind garbage", record{kind: 0xdeadbeef, pid: 1}.encode(), events.Event{}, errRecordKind},
		{"pid zero", record{kind: recFork}.encode(), events.Event{}, errRecordPid},
		{"pid negative", record{kind: recExit, pid: -5}.encode(), events.Event{}, errRecordPid},
		{"ppid negative", record{kind: recExit, pid: 5, ppid: -1}.encode(), events.Event{}, errRecordPid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Stale fields from a previous event must not survive.
			got := events.Event{Exe: "/stale", Argv: []string{"stale"}, Count: 9, Inferred: true, Tid: 77}
			err := decode(tt.b, testBoot, &got, &strs{})
			if !errors.Is(err, tt.err) {
				t.Fatalf("decode() error = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if !eventEqual(got, tt.want) {
				t.Errorf("decode() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func comm(s string) (c [16]byte) {
	copy(c[:], s)
	return c
}

func eventEqual(a, b events.Event) bool { return reflect.DeepEqual(a, b) }

// FuzzDecode checks that no input panics the decoder and that what it
// accepts is a well-formed event.
func FuzzDecode(f *testing.F) {
	f.Add(record{kind: recFork, pid: 42, tid: 42, ppid: 1, start: 5, flags: flagPidfs, ino: 9, comm: "sh"}.encode())
	f.Add(record{kind: recExit, pid: 42, tid: 43, ppid: 1, status: 9}.encode())
	f.Add([]byte{1, 2, 3})
	f.Add(execRec{record: record{kind: recExec, pid: 42, tid: 42, ppid: 1}, argc: 2, argsSize: 6,
		exe: "sh\x00bin\x00", cwd: "tmp\x00", cgroup: "docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\x00", arg: "sh\x00-c\x00"}.encode())
	f.Add(record{kind: recFork, pid: 42, tid: 42, ppid: 1}.encodeFork(ctxRec{ngroups: 40, flags: 15}))
	f.Add(execRec{record: record{kind: recExec, pid: 42, tid: 42, ppid: 1}, argc: 2, xflags: xSkipped}.encode())
	f.Add(execRec{record: record{kind: recExec, pid: 42, tid: 42, ppid: 1}, ctx: ctxRec{mntNS: 4026531841}, argc: 1, argsSize: 3,
		xflags: xExeDeleted | xCwdDeleted, exe: "prog\x00tmp\x00", cwd: "gone\x00", arg: "sh\x00"}.encode())
	f.Add(execRec{record: record{kind: recExec, pid: 42, tid: 42, ppid: 1}, argc: 1, argsSize: 3, xflags: xCgroupTrunc,
		exe: "sh\x00bin\x00", cgroup: "n9\x00", cgtop: "n0\x00docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\x00", arg: "sh\x00"}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev events.Event
		err := decode(b, testBoot, &ev, &strs{})
		if err != nil {
			return
		}
		switch {
		case len(b) == recordSize && ev.Exe == "" && !ev.Ctx.Valid:
		case len(b) == forkRecordSize && ev.Kind == events.Fork && ev.Ctx.Valid && ev.Exe == "":
		case len(b) >= execFixedSize && ev.Kind == events.Exec && ev.Ctx.Valid:
			if len(ev.Exe)+len(ev.Exec.Cwd)+len(ev.Exec.Cgroup) > len(b) {
				t.Fatalf("decode made paths longer than the record")
			}
			if ev.Exec.ExeDeleted && ev.Exe == "" || ev.Exec.CwdDeleted && ev.Exec.Cwd == "" {
				t.Fatalf("decode marked a path deleted that it does not give: exe %q cwd %q", ev.Exe, ev.Exec.Cwd)
			}
			// The id is in the path, or, for a cut one, in the top
			// levels the record carries beside it.
			if id := ev.Exec.ContainerID; id != "" && !strings.Contains(ev.Exec.Cgroup, id) &&
				(!ev.Exec.CgroupTruncated || !bytes.Contains(b[execFixedSize:], []byte(id))) {
				t.Fatalf("container id %q not in cgroup %q", id, ev.Exec.Cgroup)
			}
		default:
			t.Fatalf("decode accepted %d bytes as %v with Exe %q", len(b), ev.Kind, ev.Exe)
		}
		if ev.Kind != events.Fork && ev.Kind != events.Exec && ev.Kind != events.Exit {
			t.Fatalf("decode produced kind %v", ev.Kind)
		}
		if ev.Pid <= 0 || ev.PPid < 0 || ev.Tid < 0 || ev.Tid == ev.Pid {
			t.Fatalf("decode produced pid %d tid %d ppid %d", ev.Pid, ev.Tid, ev.PPid)
		}
		if ev.Token.Prec != token.Ticks || ev.Token.Boot != testBoot || ev.Mechanism != events.EBPF {
			t.Fatalf("decode produced token %+v mechanism %q", ev.Token, ev.Mechanism)
		}
		if ev.Kind != events.Exit && ev.Status != 0 {
			t.Fatalf("decode set status %d on %v", ev.Status, ev.Kind)
		}
		if ev.PPid == 0 && !ev.ParentToken.IsZero() {
			t.Fatalf("decode set a parent token for ppid 0")
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	benchDecode(b, record{kind: recExit, pid: 42, tid: 43, ppid: 1, start: 5, parentStart: 1,
		ino: 9, parentIno: 3, status: 3 << 8, flags: flagPidfs, comm: "bash"}.encode())
}

// BenchmarkDecodeFork decodes a fork record with its context.
func BenchmarkDecodeFork(b *testing.B) {
	benchDecode(b, record{kind: recFork, pid: 42, tid: 42, ppid: 1, start: 5, parentStart: 1, flags: flagPidfs, comm: "bash"}.
		encodeFork(ctxRec{ngroups: 2, groups: []uint32{4, 27}, flags: ctxFlagTTY | ctxFlagSidLeader}))
}

// BenchmarkDecodeExec decodes an exec record with context, paths and a
// short argv: the strings are the only allocations.
func BenchmarkDecodeExec(b *testing.B) {
	benchDecode(b, execRec{record: record{kind: recExec, pid: 42, tid: 42, ppid: 1, start: 5, flags: flagPidfs, comm: "env"},
		ctx: ctxRec{ngroups: 2, groups: []uint32{4, 27}, flags: ctxFlagTTY}, argc: 4, argsSize: 20,
		exe: "env\x00bin\x00usr\x00", cwd: "w\x00home\x00", cgroup: "session-1.scope\x00user.slice\x00",
		arg: "env\x00FOO=1\x00-u\x00x\x00"}.encode())
}

// benchDecode decodes rec over and over into one event, its strings into
// one strs, as the source does.
func benchDecode(b *testing.B, rec []byte) {
	var ev events.Event
	var sc strs
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if err := decode(rec, testBoot, &ev, &sc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeExecAllocs: an exec decodes into the strings buffer of the
// previous one without allocating, and each event reads as its own record
// said while it is the last decoded, a shorter one after a longer one
// included.
func TestDecodeExecAllocs(t *testing.T) {
	rec := func(prog, dir string, args ...string) []byte {
		return execRec{record: record{kind: recExec, pid: 42, tid: 42, ppid: 1, start: 5, flags: flagPidfs, comm: "env"},
			argc: uint32(len(args)), argsSize: uint32(len(strings.Join(args, "\x00")) + 1),
			exe: prog + "\x00bin\x00", cwd: dir + "\x00", cgroup: "user.slice\x00",
			arg: strings.Join(args, "\x00") + "\x00"}.encode()
	}
	long := rec("python3", "project", "python3", strings.Repeat("a", 3000), "--flag")
	short := rec("sh", "w", "sh", "-c")
	var ev events.Event
	var sc strs
	for _, tc := range []struct {
		b        []byte
		exe, cwd string
		argv     []string
	}{
		{b: long, exe: "/bin/python3", cwd: "/project", argv: []string{"python3", strings.Repeat("a", 3000), "--flag"}},
		{b: short, exe: "/bin/sh", cwd: "/w", argv: []string{"sh", "-c"}},
		{b: long, exe: "/bin/python3", cwd: "/project", argv: []string{"python3", strings.Repeat("a", 3000), "--flag"}},
	} {
		if err := decode(tc.b, testBoot, &ev, &sc); err != nil {
			t.Fatal(err)
		}
		if ev.Exe != tc.exe || ev.Exec.Cwd != tc.cwd || !reflect.DeepEqual(ev.Argv, tc.argv) || ev.Exec.Cgroup != "/user.slice" {
			t.Errorf("decoded exe %q cwd %q cgroup %q argv %.40q; want %q %q /user.slice %.40q", ev.Exe, ev.Exec.Cwd, ev.Exec.Cgroup, ev.Argv, tc.exe, tc.cwd, tc.argv)
		}
	}
	if a := testing.AllocsPerRun(100, func() {
		if err := decode(long, testBoot, &ev, &sc); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("decoding an exec allocates %v times, want 0", a)
	}
}
