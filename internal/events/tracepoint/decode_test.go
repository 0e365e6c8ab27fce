package tracepoint

import (
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

// encodeExec lays r out as struct exec_event, with path after the record.
func (r record) encodeExec(path string) []byte {
	b := append(r.encode(), make([]byte, filenameLen)...)
	copy(b[offFilename:], path)
	return b
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

	execPath := execThread
	execPath.tid = 42
	longPath := "/" + strings.Repeat("p", filenameLen-1) // no NUL: fills the field

	tests := []struct {
		name string
		b    []byte
		want events.Event
		err  error
	}{
		{"exec with path", execPath.encodeExec("/usr/bin/true"), events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100, Exe: "/usr/bin/true"}, nil},
		{"exec with unterminated path", execPath.encodeExec(longPath), events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 42, PPid: 41,
			Token: tok(500, 7001), ParentToken: tok(400, 7000), Comm: comm("true"), Time: 100, Exe: longPath}, nil},
		{"fork with path", fork.encodeExec("/bin/sh"), events.Event{}, errRecordSize},
		{"exec with truncated path", execPath.encodeExec("/bin/sh")[:recordSize+10], events.Event{}, errRecordSize},
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
			err := decode(tt.b, testBoot, &got)
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
	f.Add(record{kind: recExec, pid: 42, tid: 42, ppid: 1}.encodeExec("/bin/sh"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev events.Event
		err := decode(b, testBoot, &ev)
		if err != nil {
			return
		}
		switch {
		case len(b) == recordSize && ev.Exe == "":
		case len(b) == execRecordSize && ev.Kind == events.Exec && len(ev.Exe) < filenameLen+1:
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
	rec := record{kind: recExit, pid: 42, tid: 43, ppid: 1, start: 5, parentStart: 1,
		ino: 9, parentIno: 3, status: 3 << 8, flags: flagPidfs, comm: "bash"}.encode()
	var ev events.Event
	b.ReportAllocs()
	b.SetBytes(recordSize)
	for b.Loop() {
		if err := decode(rec, testBoot, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
