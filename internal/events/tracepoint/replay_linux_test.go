//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"errors"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/procsupervisor/supervisor/internal/events"
)

// fakeReader replays records; when they run out it blocks until Close, as
// the ring buffer does, or returns os.ErrClosed if closeWhenDrained. A nil
// record marks a moment the buffer is drained between two bursts.
type fakeReader struct {
	records          [][]byte
	closeWhenDrained bool
	closed           chan struct{}
}

func newFakeReader(records ...[]byte) *fakeReader {
	return &fakeReader{records: records, closed: make(chan struct{})}
}

// Marks among a fakeReader's records: deadlineMark makes ReadInto return
// os.ErrDeadlineExceeded there (the ring drained, the read deadline
// passed); discardMark is a discarded record (the program's wake-up), in
// the ring's remaining bytes but skipped, as ringbuf.Reader skips it.
var (
	deadlineMark = []byte("deadline")
	discardMark  = []byte("discarded record")
)

func isMark(r, mark []byte) bool { return len(r) > 0 && &r[0] == &mark[0] }

func (f *fakeReader) ReadInto(rec *ringbuf.Record) error {
	for len(f.records) > 0 && (f.records[0] == nil || isMark(f.records[0], discardMark)) {
		f.records = f.records[1:]
	}
	if len(f.records) > 0 && isMark(f.records[0], deadlineMark) {
		f.records = f.records[1:]
		return os.ErrDeadlineExceeded
	}
	if len(f.records) == 0 {
		if !f.closeWhenDrained {
			<-f.closed
		}
		return os.ErrClosed
	}
	rec.RawSample = append(rec.RawSample[:0], f.records[0]...)
	f.records = f.records[1:]
	rec.Remaining = f.available()
	return nil
}

// available is what the ring would still hold: the records up to the next
// pause (nil).
func (f *fakeReader) available() int {
	n := 0
	for _, r := range f.records {
		if r == nil || isMark(r, deadlineMark) {
			break
		}
		n += len(r)
	}
	return n
}

func (f *fakeReader) SetDeadline(time.Time) {}

func (f *fakeReader) Close() error {
	close(f.closed)
	return nil
}

// lostSequence returns a lost-counter reader that yields vals in turn and
// then repeats the last one.
func lostSequence(vals ...uint64) func() (uint64, error) {
	return func() (uint64, error) {
		if len(vals) == 0 {
			return 0, nil
		}
		v := vals[0]
		if len(vals) > 1 {
			vals = vals[1:]
		}
		return v, nil
	}
}

func TestReplay(t *testing.T) {
	fork := record{kind: recFork, pid: 10, tid: 10, ppid: 1, start: 3, flags: flagPidfs, ino: 5, comm: "a"}.encode()
	exit := record{kind: recExit, pid: 10, tid: 10, ppid: 1, start: 3, status: 9, flags: flagPidfs, ino: 5}.encode()
	tests := []struct {
		name    string
		records [][]byte
		lost    func() (uint64, error)
		want    []events.Kind
		counts  []uint64 // Count of each Lost event, in order
		stats   events.Stats
	}{
		{
			name:    "clean",
			records: [][]byte{fork, exit},
			want:    []events.Kind{events.Fork, events.Exit},
			stats:   events.Stats{Events: 2},
		},
		{
			name:    "truncated record skipped",
			records: [][]byte{fork[:40], exit},
			want:    []events.Kind{events.Exit},
			stats:   events.Stats{Events: 1, DecodeErrors: 1},
		},
		{
			name:    "garbage kind skipped",
			records: [][]byte{record{kind: 77, pid: 3}.encode(), fork, make([]byte, recordSize)},
			want:    []events.Kind{events.Fork},
			stats:   events.Stats{Events: 1, DecodeErrors: 2},
		},
		{
			// The counter is read once the buffer drains: after fork and
			// exit here. It has grown by 5, then stays.
			name:    "lost counter increase",
			records: [][]byte{fork, exit},
			lost:    lostSequence(5),
			want:    []events.Kind{events.Fork, events.Exit, events.Lost},
			counts:  []uint64{5},
			stats:   events.Stats{Events: 2, Lost: 5, LostReports: 1},
		},
		{
			// Three drains, two increases: each reported once with its own
			// delta; an unchanged counter reports nothing.
			name:    "lost twice",
			records: [][]byte{fork, exit, nil, fork, nil, exit},
			lost:    lostSequence(2, 2, 7),
			want:    []events.Kind{events.Fork, events.Exit, events.Lost, events.Fork, events.Exit, events.Lost},
			counts:  []uint64{2, 5},
			stats:   events.Stats{Events: 4, Lost: 7, LostReports: 2},
		},
		{
			// The last record read is followed by a discarded wake-up
			// record, so it does not say the ring drained; the deadline
			// that follows does, and the counter is read then.
			name:    "lost after a discarded record",
			records: [][]byte{fork, exit, discardMark, deadlineMark},
			lost:    lostSequence(3),
			want:    []events.Kind{events.Fork, events.Exit, events.Lost},
			counts:  []uint64{3},
			stats:   events.Stats{Events: 2, Lost: 3, LostReports: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := newFakeReader(tt.records...)
			rd.closeWhenDrained = true
			lost := tt.lost
			if lost == nil {
				lost = lostSequence(0)
			}
			s := newSource(testBoot, rd, lost, nil)
			var got []events.Kind
			var counts []uint64
			readAll(t, s, func(ev *events.Event) {
				got = append(got, ev.Kind)
				if ev.Kind == events.Lost {
					counts = append(counts, ev.Count)
				}
			})
			if !equalSlices(got, tt.want) {
				t.Errorf("Read kinds = %v, want %v", got, tt.want)
			}
			if !equalSlices(counts, tt.counts) {
				t.Errorf("Lost counts = %v, want %v", counts, tt.counts)
			}
			if st := s.Stats(); st != tt.stats {
				t.Errorf("Stats() = %+v, want %+v", st, tt.stats)
			}
		})
	}
}

// readAll reads s until it is closed, calling got with each event.
func readAll(t *testing.T, s *Source, got func(*events.Event)) {
	t.Helper()
	for {
		var ev events.Event
		err := s.Read(&ev)
		if errors.Is(err, events.ErrClosed) {
			return
		}
		if err != nil {
			t.Fatalf("Read() error = %v", err)
		}
		got(&ev)
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCloseInterruptsRead checks the shutdown order: a Read blocked on the
// ring buffer returns ErrClosed, the kernel objects are released only after
// it has returned, and later Reads and Closes are harmless.
func TestCloseInterruptsRead(t *testing.T) {
	rd := newFakeReader()
	readDone := make(chan error, 1)
	released := false
	readerClosedFirst := false
	s := newSource(testBoot, rd, lostSequence(0), func() error {
		select {
		case <-rd.closed:
			readerClosedFirst = true
		default:
		}
		released = true
		return nil
	})
	started := make(chan struct{})
	go func() {
		var ev events.Event
		close(started)
		readDone <- s.Read(&ev)
	}()
	<-started
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := <-readDone; !errors.Is(err, events.ErrClosed) {
		t.Errorf("blocked Read() = %v, want ErrClosed", err)
	}
	if !released || !readerClosedFirst {
		t.Errorf("Close: released = %v, reader closed first = %v; want both", released, readerClosedFirst)
	}
	var ev events.Event
	if err := s.Read(&ev); !errors.Is(err, events.ErrClosed) {
		t.Errorf("Read() after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

// TestRecordLayout checks decode.go's offsets against the record types
// bpf2go generated from bpf/process.bpf.c.
func TestRecordLayout(t *testing.T) {
	type field struct {
		name      string
		got, want uintptr
	}
	var e processEvent
	var x processExecEvent
	var f processForkEvent
	var c processProcCtx
	fields := []field{
		{"size", unsafe.Sizeof(e), recordSize},
		{"time_ns", unsafe.Offsetof(e.TimeNs), offTime},
		{"start_ticks", unsafe.Offsetof(e.StartTicks), offStart},
		{"parent_start_ticks", unsafe.Offsetof(e.ParentStartTicks), offParentStart},
		{"ino", unsafe.Offsetof(e.Ino), offIno},
		{"parent_ino", unsafe.Offsetof(e.ParentIno), offParentIno},
		{"kind", unsafe.Offsetof(e.Kind), offKind},
		{"pid", unsafe.Offsetof(e.Pid), offPid},
		{"tid", unsafe.Offsetof(e.Tid), offTid},
		{"ppid", unsafe.Offsetof(e.Ppid), offPPid},
		{"status", unsafe.Offsetof(e.Status), offStatus},
		{"flags", unsafe.Offsetof(e.Flags), offFlags},
		{"comm", unsafe.Offsetof(e.Comm), offComm},
		{"fork_event size", unsafe.Sizeof(f), forkRecordSize},
		{"fork_event ctx", unsafe.Offsetof(f.Ctx), offCtx},
		{"exec_event size", unsafe.Sizeof(x), execFixedSize},
		{"exec_event ctx", unsafe.Offsetof(x.Ctx), offCtx},
		{"exec_event argc", unsafe.Offsetof(x.Argc), offArgc},
		{"exec_event args_size", unsafe.Offsetof(x.ArgsSize), offArgsSize},
		{"exec_event args_len", unsafe.Offsetof(x.ArgsLen), offArgsLen},
		{"exec_event xflags", unsafe.Offsetof(x.Xflags), offXFlags},
		{"exec_event exe_len", unsafe.Offsetof(x.ExeLen), offExeLen},
		{"exec_event cwd_len", unsafe.Offsetof(x.CwdLen), offCwdLen},
		{"exec_event cgroup_len", unsafe.Offsetof(x.CgroupLen), offCgroupLen},
		{"exec_event cgtop_len", unsafe.Offsetof(x.CgtopLen), offCgtopLen},
		{"proc_ctx size", unsafe.Sizeof(c), ctxSize},
		{"proc_ctx cgroup_id", unsafe.Offsetof(c.CgroupId), ctxCgroupID},
		{"proc_ctx sid_start_ticks", unsafe.Offsetof(c.SidStartTicks), ctxSidStart},
		{"proc_ctx sid_ino", unsafe.Offsetof(c.SidIno), ctxSidIno},
		{"proc_ctx pgid_start_ticks", unsafe.Offsetof(c.PgidStartTicks), ctxPgidStart},
		{"proc_ctx pgid_ino", unsafe.Offsetof(c.PgidIno), ctxPgidIno},
		{"proc_ctx uid", unsafe.Offsetof(c.Uid), ctxUID},
		{"proc_ctx euid", unsafe.Offsetof(c.Euid), ctxEUID},
		{"proc_ctx suid", unsafe.Offsetof(c.Suid), ctxSUID},
		{"proc_ctx gid", unsafe.Offsetof(c.Gid), ctxGID},
		{"proc_ctx egid", unsafe.Offsetof(c.Egid), ctxEGID},
		{"proc_ctx sgid", unsafe.Offsetof(c.Sgid), ctxSGID},
		{"proc_ctx loginuid", unsafe.Offsetof(c.Loginuid), ctxLoginUID},
		{"proc_ctx audit_session", unsafe.Offsetof(c.AuditSession), ctxAuditSession},
		{"proc_ctx sid", unsafe.Offsetof(c.Sid), ctxSID},
		{"proc_ctx pgid", unsafe.Offsetof(c.Pgid), ctxPGID},
		{"proc_ctx ns_pid", unsafe.Offsetof(c.NsPid), ctxNSPid},
		{"proc_ctx pidns_ino", unsafe.Offsetof(c.PidnsIno), ctxPidNS},
		{"proc_ctx mntns_ino", unsafe.Offsetof(c.MntnsIno), ctxMntNS},
		{"proc_ctx tty_major", unsafe.Offsetof(c.TtyMajor), ctxTTYMajor},
		{"proc_ctx tty_minor", unsafe.Offsetof(c.TtyMinor), ctxTTYMinor},
		{"proc_ctx ngroups", unsafe.Offsetof(c.Ngroups), ctxNGroups},
		{"proc_ctx flags", unsafe.Offsetof(c.Flags), ctxFlags},
		{"proc_ctx groups", unsafe.Offsetof(c.Groups), ctxGroups},
		{"proc_ctx groups len", uintptr(len(c.Groups)), events.MaxGroups},
		{"proc_ctx pad", unsafe.Offsetof(c.Pad), ctxPad},
	}
	for _, f := range fields {
		if f.got != f.want {
			t.Errorf("struct event %s at %d, decode.go says %d", f.name, f.got, f.want)
		}
	}
}

// BenchmarkRead measures the whole Read path over a replayed record: ring
// buffer record in, events.Event out, with the lost-counter look every
// time the fake drains.
func BenchmarkRead(b *testing.B) {
	rec := record{kind: recExec, pid: 10, tid: 10, ppid: 1, start: 3, flags: flagPidfs, ino: 5, comm: "a"}.encode()
	rd := &loopReader{rec: rec}
	s := newSource(testBoot, rd, lostSequence(0), nil)
	var ev events.Event
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Read(&ev); err != nil {
			b.Fatal(err)
		}
	}
}

// loopReader yields the same record forever and claims to be drained after
// each, so every Read also looks at the lost counter.
type loopReader struct{ rec []byte }

func (l *loopReader) ReadInto(rec *ringbuf.Record) error {
	rec.RawSample = append(rec.RawSample[:0], l.rec...)
	rec.Remaining = 0
	return nil
}
func (l *loopReader) SetDeadline(time.Time) {}
func (l *loopReader) Close() error          { return nil }
