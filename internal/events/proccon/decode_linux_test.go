package proccon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// rawSource returns a Source whose next datagram is b, as if received from
// the kernel; once it is consumed, Read returns errDrained.
func rawSource(tb testing.TB, procs tableProber, b []byte) *Source {
	tb.Helper()
	c := nltest.Dial(func([]netlink.Message) ([]netlink.Message, error) { return nil, errDrained })
	s := newSource(c, testBoot, procs, 0)
	s.now = func() uint64 { return 1 << 62 }
	s.buf = b
	s.n, s.off, s.fromKernel = len(b), 0, true
	return s
}

// FuzzDecode feeds arbitrary datagrams through the decoder and the event
// logic: malformed input is counted, never a panic, and whatever is
// delivered is a well-formed event.
func FuzzDecode(f *testing.F) {
	f.Add(appendEvent(nil, ptr(fork(5*sec, 1, 100, 100)), 0))
	f.Add(append(appendEvent(nil, ptr(execEv(5*sec, 100, 100)), 0), appendEvent(nil, ptr(exitEv(6*sec, 101, 100, 0, 1)), 0)...))
	f.Add(appendEvent(nil, ptr(exitEv(6*sec, 100, 100, 256, 1)), 0)[:50])
	f.Add([]byte{})
	// A gap in CPU 1's numbers, then a number seen before.
	f.Add(append(append(appendEvent(nil, ptr(onCPU(1, 5, fork(5*sec, 1, 100, 100))), 0),
		appendEvent(nil, ptr(onCPU(1, 9, exitEv(6*sec, 100, 100, 0, 1))), 0)...),
		appendEvent(nil, ptr(onCPU(1, 9, exitEv(6*sec, 100, 100, 0, 1))), 0)...))
	procs := tableProber{
		100: proc(100, 1, 'Z', 500, 1, 9001, "child"),
		200: proc(200, 1, 'S', 500, 3, 9002, "threads"),
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := rawSource(t, procs, b)
		var delivered uint64
		for {
			var ev events.Event
			err := s.Read(&ev)
			if errors.Is(err, errDrained) {
				break
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			switch ev.Kind {
			case events.Lost:
				if ev.Count == 0 {
					t.Fatalf("delivered %+v: a gap or an unclassified exit is a count", ev)
				}
			case events.Fork, events.Exec, events.Exit:
				delivered++
				if ev.Pid <= 0 || ev.Mechanism != events.Netlink {
					t.Fatalf("delivered %+v: want a positive pid and the netlink mechanism", ev)
				}
				if !ev.Token.IsZero() && ev.Pid != 100 && ev.Pid != 200 {
					t.Fatalf("token %v for pid %d, which /proc does not hold", ev.Token, ev.Pid)
				}
			default:
				t.Fatalf("delivered %+v: unexpected kind", ev)
			}
		}
		if st := s.Stats(); st.Events != delivered {
			t.Fatalf("Stats().Events = %d, delivered %d", st.Events, delivered)
		}
	})
}

func TestParseMessage(t *testing.T) {
	good := appendEvent(nil, ptr(fork(5*sec, 1, 100, 100)), 0)
	tests := []struct {
		name    string
		b       []byte
		wantErr error
	}{
		{"fork", good, nil},
		{"short header", good[:10], errShort},
		{"nlmsg_len beyond datagram", good[:60], errLength},
		{"nlmsg_len below header", mutate(good, func(b []byte) { ne.PutUint32(b, 8) }), errLength},
		{"wrong type", mutate(good, func(b []byte) { ne.PutUint16(b[4:], 2) }), errType},
		{"user-space port", mutate(good, func(b []byte) { ne.PutUint32(b[12:], 77) }), errNotKernel},
		{"other connector", mutate(good, func(b []byte) { ne.PutUint32(b[20:], 9) }), errNotProc},
		{"cn len beyond message", mutate(good, func(b []byte) { ne.PutUint16(b[32:], 41) }), errLength},
		{"cn len below event header", mutate(good, func(b []byte) { ne.PutUint16(b[32:], 8) }), errShort},
		{"fork payload too short", mutate(good, func(b []byte) { ne.PutUint16(b[32:], 24) }), errPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev rawEvent
			next, err := parseMessage(tt.b, &ev)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("parseMessage = %v, want %v", err, tt.wantErr)
			}
			if next <= 0 || next > len(tt.b) {
				t.Errorf("parseMessage advanced %d of %d bytes", next, len(tt.b))
			}
			if err == nil && (ev.what != whatFork || ev.ts != 5*sec || ev.data[forkChildTgid] != 100) {
				t.Errorf("parseMessage = %+v, want the fork of 100 at 5 s", ev)
			}
		})
	}
}

func mutate(b []byte, f func([]byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

func TestNumThreads(t *testing.T) {
	tests := []struct {
		line string
		want int32
		ok   bool
	}{
		{"1 (a b) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 7 0 42 1 2\n", 7, true},
		{"1 (x) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 12", 12, true},
		{"1 (x) S 0 1 1\n", 0, false},
		{"1 (x) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 x 0 42", 0, false},
		{"no comm", 0, false},
	}
	for _, tt := range tests {
		got, ok := numThreads([]byte(tt.line))
		if got != tt.want || ok != tt.ok {
			t.Errorf("numThreads(%q) = %d, %v, want %d, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// decodeRound is one datagram through the decoder and the event logic, /proc
// answered by a table: the fork, exec and exit of an observed process, a
// thread's creation and exit in it, and every fourth round a gap in the
// CPU's numbers before the datagram (a Lost event).
type decodeRound struct {
	s     *Source
	d     []byte
	ts    uint64
	seq   uint32
	round int
}

func newDecodeRound(tb testing.TB) *decodeRound {
	procs := tableProber{100: proc(100, 1, 'Z', 500, 1, 9001, "child")}
	var d []byte
	d = appendEvent(d, ptr(fork(5*sec, 1, 100, 100)), 0)
	d = appendEvent(d, ptr(execEv(5*sec, 100, 100)), 0)
	d = appendEvent(d, ptr(fork(5*sec, 100, 101, 100)), 0)
	d = appendEvent(d, ptr(exitEv(5*sec, 101, 100, 0, 1)), 0)
	d = appendEvent(d, ptr(exitEv(5*sec, 100, 100, 0, 1)), 0)
	return &decodeRound{s: rawSource(tb, procs, d), d: d, ts: 5 * sec}
}

const decodeMsgs = 5

// run feeds the datagram once more with new times and numbers and reads
// every event out of it; it returns what went wrong.
func (r *decodeRound) run(ev *events.Event) error {
	r.round++
	if r.round%4 == 0 {
		r.seq += 7 // five messages the socket never got
	}
	for i := range decodeMsgs {
		r.ts++
		r.seq++
		ne.PutUint64(r.d[i*msgLen+44:], r.ts)
		ne.PutUint32(r.d[i*msgLen+24:], r.seq) // cn_msg seq
	}
	r.s.off, r.s.n = 0, len(r.d)
	want := 3 // fork, exec, exit
	if r.round%4 == 0 {
		want++ // the Lost event
	}
	for range want {
		if err := r.s.Read(ev); err != nil {
			return err
		}
	}
	if r.s.off != r.s.n {
		return fmt.Errorf("round %d: %d bytes left after %d events", r.round, r.s.n-r.s.off, want)
	}
	return nil
}

// BenchmarkDecode measures decodeRound: 0 allocs/op.
func BenchmarkDecode(b *testing.B) {
	r := newDecodeRound(b)
	var ev events.Event
	b.ReportAllocs()
	for b.Loop() {
		if err := r.run(&ev); err != nil {
			b.Fatal(err)
		}
	}
}

// The decode path does not allocate per event: thread counts, exit records
// and CPU numbers live in maps and slices that reach their size and stay.
func TestDecodeDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what allocates")
	}
	r := newDecodeRound(t)
	var ev events.Event
	for range 64 { // let the maps reach their size
		if err := r.run(&ev); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := r.run(&ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decode allocates %v times per datagram of %d messages, want 0", allocs, decodeMsgs)
	}
}

// BenchmarkProbe measures what a token costs on the live kernel: the stat
// read alone, and the pidfd-bound read with the pidfs inode that the
// source does for every fork and exec.
func BenchmarkProbe(b *testing.B) {
	p, err := newKernelProber()
	if err != nil {
		testenv.Skip(b, "kernel prober: %v", err)
	}
	// A single-threaded child: /proc/PID/stat of a many-threaded process
	// (like the test binary) sums over its threads and costs more.
	cmd := exec.Command("/bin/sleep", "60")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := int32(cmd.Process.Pid)
	var pi procInfo
	b.Run("stat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := p.stat(pid, &pi); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pidfd+stat+inode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := p.bind(pid, &pi); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The premise of kernelProber.bind on the live kernel: an open
// /proc/PID/stat stays tied to the instance that held PID when it was
// opened, so once that instance is reaped the read fails, and a pid
// reissued in between is never described by it.
func TestIntegrationStatFileTiedToInstance(t *testing.T) {
	testenv.RequireRoot(t)
	p, err := newKernelProber()
	if err != nil {
		testenv.Skip(t, "kernel prober: %v", err)
	}
	cmd := exec.Command("/bin/sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := p.openStat(int32(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	cmd.Process.Kill()
	cmd.Wait() // reaped: the pid is free for anyone
	var pi procInfo
	if err := p.readStat(fd, &pi); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read of a reaped instance's stat = %v (%+v), want ErrNotExist", err, pi.Stat)
	}
}

// A process already gone costs bind one failed open, and a live one is read
// whole: what the storm's forks cost.
func BenchmarkBind(b *testing.B) {
	p, err := newKernelProber()
	if err != nil {
		testenv.Skip(b, "kernel prober: %v", err)
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	gone := int32(cmd.Process.Pid)
	var pi procInfo
	b.ReportAllocs()
	for b.Loop() {
		if err := p.bind(gone, &pi); !errors.Is(err, os.ErrNotExist) {
			b.Fatalf("bind of a gone pid = %v", err)
		}
	}
}
