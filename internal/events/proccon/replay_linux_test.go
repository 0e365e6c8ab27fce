package proccon

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

var testBoot = procfs.BootID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// Timestamps in replayed events: the clock offset is 0, so boot time equals
// the event time and a tick is 10 ms.
const sec = uint64(1_000_000_000)

// tableProber is /proc as a table; a missing pid is a process that is gone.
type tableProber map[int32]procInfo

func (p tableProber) stat(pid int32, pi *procInfo) error {
	v, ok := p[pid]
	if !ok {
		return os.ErrNotExist
	}
	if v.Threads < 0 {
		return unix.EIO // a read that fails for another reason than a gone process
	}
	*pi = v
	pi.Ino = 0
	return nil
}

func (p tableProber) bind(pid int32, pi *procInfo) error {
	v, ok := p[pid]
	if !ok {
		return os.ErrNotExist
	}
	*pi = v
	return nil
}

func proc(pid, ppid int32, state byte, start uint64, threads int32, ino uint64, comm string) procInfo {
	pi := procInfo{Stat: procfs.Stat{Pid: pid, PPid: ppid, State: state, StartTime: start}, Threads: threads, Ino: ino}
	copy(pi.Stat.Comm[:], comm)
	return pi
}

// seqNext numbers the events the helpers below build, in the order they are
// built, as the kernel numbers one CPU's messages (CPU 0 here): tests list
// their messages in queue order, so a test's messages are numbered without
// gaps unless it makes one.
var seqNext uint32

func numbered(ev rawEvent) rawEvent {
	seqNext++
	ev.seq = seqNext
	return ev
}

// onCPU is ev sent from cpu with number seq.
func onCPU(cpu, seq uint32, ev rawEvent) rawEvent {
	ev.cpu, ev.seq = cpu, seq
	return ev
}

func fork(ts uint64, parent, child, childTgid int32) rawEvent {
	return numbered(rawEvent{what: whatFork, ts: ts, data: [6]uint32{
		forkParentPid: uint32(parent), forkParentTgid: uint32(parent),
		forkChildPid: uint32(child), forkChildTgid: uint32(childTgid),
	}})
}

func execEv(ts uint64, pid, tgid int32) rawEvent {
	return numbered(rawEvent{what: whatExec, ts: ts, data: [6]uint32{execPid: uint32(pid), execTgid: uint32(tgid)}})
}

func exitEv(ts uint64, pid, tgid int32, status uint32, ppid int32) rawEvent {
	return numbered(rawEvent{what: whatExit, ts: ts, data: [6]uint32{
		exitPid: uint32(pid), exitTgid: uint32(tgid), exitCode: status, exitSignal: 17,
		exitPPid: uint32(ppid), exitPTgid: uint32(ppid),
	}})
}

// msg is ev as the kernel sends it (nlmsg_pid 0).
func msg(ev rawEvent) netlink.Message { return rawMsg(appendEvent(nil, &ev, 0)) }

func rawMsg(b []byte) netlink.Message {
	var m netlink.Message
	if err := m.UnmarshalBinary(b); err != nil {
		panic(err)
	}
	return m
}

// datagram is what one Receive returns: messages, or an error.
type datagram struct {
	msgs []netlink.Message
	err  error
}

func dg(evs ...rawEvent) datagram {
	var d datagram
	for _, ev := range evs {
		d.msgs = append(d.msgs, msg(ev))
	}
	return d
}

var errDrained = errors.New("replay drained")

// replay is a fake kernel: it acks LISTEN, records the control ops it was
// sent, and hands out the datagrams one per multicast Receive.
type replay struct {
	dgrams []datagram
	ops    []uint32
}

func (r *replay) fn(req []netlink.Message) ([]netlink.Message, error) {
	if len(req) > 0 {
		d := req[0].Data
		if len(d) != cnMsgLen+4 {
			return nil, fmt.Errorf("control message of %d bytes", len(d))
		}
		op := ne.Uint32(d[cnMsgLen:])
		r.ops = append(r.ops, op)
		if op != mcastListen {
			return nil, nil
		}
		// The ack comes from a CPU of its own, so its number does not
		// interleave with the events', which were built before it.
		ack := rawEvent{what: whatNone, cpu: 63, seq: 77, ack: ne.Uint32(d[12:16]) + 1}
		return []netlink.Message{msg(ack)}, nil
	}
	if len(r.dgrams) == 0 {
		return nil, errDrained
	}
	d := r.dgrams[0]
	r.dgrams = r.dgrams[1:]
	return d.msgs, d.err
}

// newReplay returns a subscribed Source reading the datagrams, with /proc
// as the table.
// The source's clock reads now (handling is later than every event when
// now is 0).
func newReplay(t testing.TB, procs tableProber, now uint64, dgrams ...datagram) (*Source, *replay) {
	t.Helper()
	r := &replay{dgrams: dgrams}
	s := newSource(nltest.Dial(r.fn), testBoot, procs, 0)
	if now == 0 {
		now = 1 << 62
	}
	s.now = func() uint64 { return now }
	if err := s.subscribe(0); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return s, r
}

// drain reads until the replay is exhausted.
func drain(t *testing.T, s *Source) []events.Event {
	t.Helper()
	var got []events.Event
	for {
		var ev events.Event
		err := s.Read(&ev)
		if errors.Is(err, errDrained) {
			return got
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		got = append(got, ev)
	}
}

func tok(start, ino uint64) token.Token {
	return token.Token{Boot: testBoot, Start: start, Ino: ino, Prec: token.Ticks}
}

func comm(s string) (c [16]byte) {
	copy(c[:], s)
	return c
}

func TestReplay(t *testing.T) {
	nl := events.Netlink
	tests := []struct {
		name   string
		procs  tableProber
		now    uint64
		dgrams []datagram
		want   []events.Event
		stats  events.Stats
	}{{
		name: "fork exec exit",
		// The child is a zombie by the time the events are handled: its
		// fork and exec are still provable, and its exit is final.
		procs: tableProber{100: proc(100, 1, 'Z', 500, 1, 9001, "child")},
		dgrams: []datagram{dg(
			fork(5*sec, 1, 100, 100),
			execEv(5*sec+1000, 100, 100),
			exitEv(6*sec, 100, 100, 3<<8, 1),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 9001), Comm: comm("child"), Time: 5 * sec},
			{Kind: events.Exec, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 9001), Comm: comm("child"), Time: 5*sec + 1000},
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Status: 3 << 8, Time: 6 * sec},
		},
		stats: events.Stats{Events: 3},
	}, {
		name:  "thread creation and exit are not processes",
		procs: tableProber{100: proc(100, 1, 'S', 500, 2, 9001, "app")},
		dgrams: []datagram{dg(
			fork(5*sec, 100, 101, 100),
			exitEv(6*sec, 101, 100, 0, 1),
		)},
	}, {
		name: "multi-threaded exit is reported once, with the last thread",
		dgrams: []datagram{dg(
			exitEv(6*sec, 101, 100, 2<<8, 1),
			exitEv(6*sec+10, 100, 100, 2<<8, 1),
			exitEv(6*sec+20, 102, 100, 2<<8, 1),
		), dg(
			exitEv(6*sec+30, 103, 100, 2<<8, 1), // a straggler, handled after the report
		)},
		want: []events.Event{
			{Kind: events.Exit, Mechanism: nl, Pid: 100, Tid: 102, PPid: 1, Status: 2 << 8, Time: 6*sec + 20},
		},
		stats: events.Stats{Events: 1},
	}, {
		name: "an event sent after the group was seen dead flushes its exit first",
		now:  6*sec + 50,
		dgrams: []datagram{dg(
			exitEv(6*sec, 100, 100, 0, 1),
			fork(6*sec+100, 1, 300, 300),
		)},
		want: []events.Event{
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Time: 6 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 300, PPid: 1, Time: 6*sec + 100},
		},
		stats: events.Stats{Events: 2},
	}, {
		name: "an earlier-sent event does not flush the exit",
		dgrams: []datagram{dg(
			exitEv(6*sec, 100, 100, 0, 1),
			fork(6*sec+100, 1, 300, 300),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 300, PPid: 1, Time: 6*sec + 100},
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Time: 6 * sec},
		},
		stats: events.Stats{Events: 2},
	}, {
		name: "leader exits first, last thread later",
		// At the leader's exit the group still had a thread: no report.
		procs:  tableProber{100: proc(100, 1, 'Z', 500, 2, 0, "app")},
		dgrams: []datagram{dg(exitEv(6*sec, 100, 100, 0, 1))},
	}, {
		name: "exec from a non-leader thread",
		// The old leader's exit arrives with pid == tgid, then the exec;
		// the group lives on.
		procs: tableProber{100: proc(100, 1, 'R', 500, 1, 9001, "new")},
		dgrams: []datagram{dg(
			exitEv(6*sec, 100, 100, 0, 1),
			execEv(6*sec+10, 100, 100),
		)},
		want: []events.Event{
			{Kind: events.Exec, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 9001), Comm: comm("new"), Time: 6*sec + 10},
		},
		stats: events.Stats{Events: 1},
	}, {
		name: "an exec after a fork that could not be bound is unproven",
		// At the read, pid 100 is held by a child of 7 started within the
		// fork's tick: A's successor, not A (whose parent is 1).
		procs: tableProber{100: proc(100, 7, 'S', 500, 1, 9002, "successor")},
		dgrams: []datagram{dg(
			fork(5*sec, 1, 100, 100),
			execEv(5*sec+1000, 100, 100),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Exec, Mechanism: nl, Pid: 100, Time: 5*sec + 1000},
		},
		stats: events.Stats{Events: 2},
	}, {
		name: "an exec of an unseen fork by a process started within a tick of it is unproven",
		// Started at tick 599, the exec at tick 600: it may have been
		// born after the exec.
		procs:  tableProber{100: proc(100, 1, 'S', 599, 1, 9002, "new")},
		dgrams: []datagram{dg(execEv(6*sec, 100, 100))},
		want:   []events.Event{{Kind: events.Exec, Mechanism: nl, Pid: 100, Time: 6 * sec}},
		stats:  events.Stats{Events: 1},
	}, {
		// The kernel never sends a message twice; one numbered behind
		// its CPU's last is handled as it is (kernels before 4.3 could
		// reorder one CPU's messages), never dropped.
		name:  "a message numbered behind its CPU's last is handled, not dropped",
		procs: tableProber{100: proc(100, 1, 'S', 500, 1, 9001, "child")},
		dgrams: func() []datagram {
			f, x := fork(5*sec, 1, 100, 100), exitEv(7*sec, 200, 200, 0, 1)
			return []datagram{dg(f, f), dg(f), dg(x, x), dg(x)}
		}(),
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 9001), Comm: comm("child"), Time: 5 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 9001), Comm: comm("child"), Time: 5 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 9001), Comm: comm("child"), Time: 5 * sec},
			{Kind: events.Exit, Mechanism: nl, Pid: 200, PPid: 1, Time: 7 * sec},
		},
		stats: events.Stats{Events: 4},
	}, {
		name: "exit delivered before a fork of the same pid, out of order",
		// The exit (sent on another CPU) overtook the fork: the child is
		// gone when the fork is handled, so its token is unproven.
		dgrams: []datagram{dg(
			exitEv(6*sec, 100, 100, 0, 1),
			fork(5*sec, 1, 100, 100),
		)},
		want: []events.Event{
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Time: 6 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
		},
		stats: events.Stats{Events: 2},
	}, {
		name: "straggler of an old generation after the pid was reissued",
		// 100 exits, is reissued (new process started at tick 900), and a
		// late thread exit of the old group arrives: no second exit, and the
		// new process keeps running.
		procs: tableProber{100: proc(100, 1, 'S', 900, 1, 9002, "new")},
		dgrams: []datagram{
			dg(exitEv(6*sec, 100, 100, 0, 1)),
			dg(fork(9*sec, 1, 100, 100), exitEv(6*sec+5, 101, 100, 0, 1)),
		},
		want: []events.Event{
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Time: 6 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(900, 9002), Comm: comm("new"), Time: 9 * sec},
		},
		stats: events.Stats{Events: 2},
	}, {
		name: "the next generation's exit is reported",
		dgrams: []datagram{
			dg(exitEv(6*sec, 100, 100, 0, 1)),
			dg(fork(9*sec, 1, 100, 100), exitEv(10*sec, 100, 100, 1<<8, 1)),
		},
		want: []events.Event{
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Time: 6 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 9 * sec},
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Status: 1 << 8, Time: 10 * sec},
		},
		stats: events.Stats{Events: 3},
	}, {
		name: "pid reissued before the fork was handled",
		// The process now at 100 started 2 s after the fork event.
		procs:  tableProber{100: proc(100, 1, 'S', 700, 1, 9002, "stranger")},
		dgrams: []datagram{dg(fork(5*sec, 1, 100, 100))},
		want:   []events.Event{{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec}},
		stats:  events.Stats{Events: 1},
	}, {
		name:   "start time one tick after the event is accepted",
		procs:  tableProber{100: proc(100, 1, 'S', 501, 1, 9001, "child")},
		dgrams: []datagram{dg(fork(5*sec, 1, 100, 100))},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(501, 9001), Comm: comm("child"), Time: 5 * sec},
		},
		stats: events.Stats{Events: 1},
	}, {
		name:   "child reparented before the fork was handled",
		procs:  tableProber{100: proc(100, 1, 'S', 500, 1, 9001, "child")},
		dgrams: []datagram{dg(fork(5*sec, 50, 100, 100))},
		want:   []events.Event{{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 50, Time: 5 * sec}},
		stats:  events.Stats{Events: 1},
	}, {
		name: "garbage and truncated messages are counted and skipped",
		dgrams: []datagram{
			{msgs: []netlink.Message{{Header: netlink.Header{Length: 20, Type: nlmsgDone}, Data: []byte{1, 0, 0, 0}}}},
			{msgs: []netlink.Message{truncated(nlHdrLen + cnMsgLen + 8)}},
			{msgs: []netlink.Message{truncatedPayload()}},
			dg(fork(5*sec, 1, 100, 100)),
		},
		want:  []events.Event{{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec}},
		stats: events.Stats{Events: 1, DecodeErrors: 3},
	}, {
		name: "messages not from the kernel are dropped",
		dgrams: []datagram{
			{msgs: []netlink.Message{rawMsg(appendEvent(nil, ptr(fork(5*sec, 1, 100, 100)), 4242))}},
			{msgs: []netlink.Message{wrongConnector()}},
		},
		stats: events.Stats{DecodeErrors: 2},
	}, {
		name: "other listeners' acks and unused kinds are ignored",
		dgrams: []datagram{dg(
			numbered(rawEvent{what: whatNone, ack: 12345}),
			numbered(rawEvent{what: 0x200, data: [6]uint32{100, 100}}), // PROC_EVENT_COMM
		)},
	}, {
		// The orders that lost exits: the exit of an observed child is
		// handled when /proc no longer describes it truthfully (here it
		// still shows the child running, as a stale or failed read would
		// leave it), behind a backlog of messages sent earlier. A counted
		// group needs no /proc and no hold: each exit goes out at once.
		name:  "an observed child's exit is counted, whatever /proc says",
		procs: tableProber{100: proc(100, 1, 'S', 500, 1, 0, ""), 101: proc(101, 1, 'S', 500, 1, 0, "")},
		now:   1,
		dgrams: []datagram{dg(
			fork(5*sec, 1, 100, 100),
			fork(5*sec+10, 1, 101, 101),
			exitEv(5*sec+20, 100, 100, 0, 0), // parent 0: reaped before the kernel sent it
			fork(5*sec+15, 7, 300, 300),      // sent earlier, from another CPU
			exitEv(5*sec+30, 101, 101, 1<<8, 1),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 0), Time: 5 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 101, PPid: 1, Token: tok(500, 0), Time: 5*sec + 10},
			{Kind: events.Exit, Mechanism: nl, Pid: 100, Time: 5*sec + 20},
			{Kind: events.Fork, Mechanism: nl, Pid: 300, PPid: 7, Time: 5*sec + 15},
			{Kind: events.Exit, Mechanism: nl, Pid: 101, PPid: 1, Status: 1 << 8, Time: 5*sec + 30},
		},
		stats: events.Stats{Events: 5},
	}, {
		name: "an observed group exits with its last thread",
		dgrams: []datagram{dg(
			fork(5*sec, 1, 100, 100),
			fork(5*sec+10, 1, 101, 100),
			fork(5*sec+20, 1, 102, 100),
			exitEv(6*sec, 100, 100, 2<<8, 1), // the leader first
			exitEv(6*sec+10, 102, 100, 2<<8, 1),
			exitEv(6*sec+20, 101, 100, 2<<8, 1),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Exit, Mechanism: nl, Pid: 100, Tid: 101, PPid: 1, Status: 2 << 8, Time: 6*sec + 20},
		},
		stats: events.Stats{Events: 2},
	}, {
		// The orders below are ones the kernel cannot be made to produce
		// on demand: a message numbered but never queued (an allocation
		// that failed in the kernel), a thread exit overtaken by the fork
		// of a new process at the same pid, a /proc that cannot answer.
		name: "a thread creation the socket never got is a gap: counts dropped, loss reported",
		// Without the gap, the count would reach zero at the leader's
		// exit while the unseen thread still runs: a false exit.
		procs: tableProber{100: proc(100, 1, 'S', 500, 1, 0, "app")},
		dgrams: func() []datagram {
			f := fork(5*sec, 1, 100, 100)
			_ = fork(5*sec+10, 100, 101, 100) // numbered, never queued
			return []datagram{dg(f, exitEv(6*sec, 100, 100, 0, 1))}
		}(),
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 0), Comm: comm("app"), Time: 5 * sec},
			{Kind: events.Lost, Mechanism: nl, Count: 1},
		},
		stats: events.Stats{Events: 1, Lost: 1, LostReports: 1},
	}, {
		name: "an exit the socket never got is a gap, reported before the next message",
		dgrams: func() []datagram {
			f := fork(5*sec, 1, 100, 100)
			_ = exitEv(6*sec, 100, 100, 0, 1)
			_ = exitEv(6*sec+1, 150, 150, 0, 1)
			return []datagram{dg(f, fork(7*sec, 1, 200, 200))}
		}(),
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Lost, Mechanism: nl, Count: 2},
			{Kind: events.Fork, Mechanism: nl, Pid: 200, PPid: 1, Time: 7 * sec},
		},
		stats: events.Stats{Events: 2, Lost: 2, LostReports: 1},
	}, {
		name: "each CPU is numbered on its own",
		// Interleaved CPUs with consecutive numbers each lose nothing; a
		// jump on CPU 2 alone is its gap.
		dgrams: []datagram{dg(
			onCPU(1, 40, fork(5*sec, 1, 100, 100)),
			onCPU(2, 7, fork(5*sec+1, 1, 101, 101)),
			onCPU(1, 41, exitEv(5*sec+2, 100, 100, 0, 1)),
			onCPU(2, 8, exitEv(5*sec+3, 101, 101, 0, 1)),
			onCPU(2, 12, fork(5*sec+4, 1, 102, 102)),
			onCPU(1, 42, fork(5*sec+5, 1, 103, 103)),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 101, PPid: 1, Time: 5*sec + 1},
			{Kind: events.Exit, Mechanism: nl, Pid: 100, PPid: 1, Time: 5*sec + 2},
			{Kind: events.Exit, Mechanism: nl, Pid: 101, PPid: 1, Time: 5*sec + 3},
			{Kind: events.Lost, Mechanism: nl, Count: 3},
			{Kind: events.Fork, Mechanism: nl, Pid: 102, PPid: 1, Time: 5*sec + 4},
			{Kind: events.Fork, Mechanism: nl, Pid: 103, PPid: 1, Time: 5*sec + 5},
		},
		stats: events.Stats{Events: 6, Lost: 3, LostReports: 1},
	}, {
		name: "a number from the past, or a CPU out of range, is handled without a loss",
		dgrams: []datagram{dg(
			onCPU(1, 40, fork(5*sec, 1, 100, 100)),
			onCPU(1, 39, fork(5*sec+1, 1, 101, 101)),
			onCPU(maxCPU, 1, fork(5*sec+2, 1, 102, 102)),
			onCPU(maxCPU, 9, fork(5*sec+3, 1, 103, 103)),
			onCPU(1, 41, fork(5*sec+4, 1, 104, 104)),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 101, PPid: 1, Time: 5*sec + 1},
			{Kind: events.Fork, Mechanism: nl, Pid: 102, PPid: 1, Time: 5*sec + 2},
			{Kind: events.Fork, Mechanism: nl, Pid: 103, PPid: 1, Time: 5*sec + 3},
			{Kind: events.Fork, Mechanism: nl, Pid: 104, PPid: 1, Time: 5*sec + 4},
		},
		stats: events.Stats{Events: 5},
	}, {
		name: "a last thread's exit overtaken by the fork of a new process at its pid is a reported loss",
		// 100 had a thread; its leader exits, its last thread exits on
		// another CPU, and 100 is reissued: the new fork is queued before
		// that exit. /proc shows the newcomer, born within the exit's tick.
		procs: tableProber{100: proc(100, 1, 'S', 600, 1, 9002, "new")},
		dgrams: []datagram{dg(
			onCPU(0, 1, fork(5*sec, 1, 100, 100)),
			onCPU(0, 2, fork(5*sec+10, 100, 101, 100)),
			onCPU(0, 3, exitEv(6*sec, 100, 100, 0, 1)),
			onCPU(0, 4, fork(6*sec+5, 1, 100, 100)),
			onCPU(1, 9, exitEv(6*sec+1, 101, 100, 0, 1)),
		)},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(600, 9002), Comm: comm("new"), Time: 6*sec + 5},
			{Kind: events.Lost, Mechanism: nl, Count: 1},
		},
		stats: events.Stats{Events: 2, Lost: 1, LostReports: 1},
	}, {
		name:   "an exit /proc cannot classify is a reported loss, not a silent miss",
		procs:  tableProber{100: proc(100, 1, 'S', 500, -1, 0, "app")},
		dgrams: []datagram{dg(exitEv(6*sec, 101, 100, 0, 1))},
		want:   []events.Event{{Kind: events.Lost, Mechanism: nl, Count: 1}},
		stats:  events.Stats{Lost: 1, LostReports: 1},
	}, {
		name: "an unobserved group held by a process born within the exit's tick is a reported loss",
		// Either the group (born late in the last tick) lives on, or it
		// died and 100 was reissued: ticks cannot tell.
		procs:  tableProber{100: proc(100, 1, 'S', 599, 1, 0, "app")},
		dgrams: []datagram{dg(exitEv(6*sec, 101, 100, 0, 1))},
		want:   []events.Event{{Kind: events.Lost, Mechanism: nl, Count: 1}},
		stats:  events.Stats{Lost: 1, LostReports: 1},
	}, {
		name:   "an unobserved group that started before the exit's tick lives on",
		procs:  tableProber{100: proc(100, 1, 'S', 598, 2, 0, "app")},
		dgrams: []datagram{dg(exitEv(6*sec, 101, 100, 0, 1))},
	}, {
		name: "counts do not cross a loss",
		// After the overflow the group is unobserved: /proc decides, and
		// here it shows the process alive, so no exit is invented.
		procs: tableProber{100: proc(100, 1, 'S', 500, 1, 0, "app")},
		dgrams: []datagram{
			dg(fork(5*sec, 1, 100, 100)),
			{err: unix.ENOBUFS},
			dg(exitEv(6*sec, 100, 100, 0, 1)),
		},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Token: tok(500, 0), Comm: comm("app"), Time: 5 * sec},
			{Kind: events.Lost, Mechanism: nl},
		},
		stats: events.Stats{Events: 1, Lost: 1, LostReports: 1},
	}, {
		name: "overflow delivers one Lost event and reading goes on",
		// The messages dropped by the overflow leave a gap in the numbers,
		// which the Lost event already covers.
		dgrams: []datagram{
			dg(onCPU(0, 1, fork(5*sec, 1, 100, 100))),
			{err: unix.ENOBUFS},
			dg(onCPU(0, 900, fork(6*sec, 1, 101, 101))),
		},
		want: []events.Event{
			{Kind: events.Fork, Mechanism: nl, Pid: 100, PPid: 1, Time: 5 * sec},
			{Kind: events.Lost, Mechanism: nl},
			{Kind: events.Fork, Mechanism: nl, Pid: 101, PPid: 1, Time: 6 * sec},
		},
		stats: events.Stats{Events: 2, Lost: 1, LostReports: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newReplay(t, tt.procs, tt.now, tt.dgrams...)
			got := drain(t, s)
			for i := range got {
				if got[i].Kind == events.Lost {
					got[i].Time = 0 // the wall clock at the loss
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n got %+v\nwant %+v", got, tt.want)
			}
			if st := s.Stats(); st != tt.stats {
				t.Errorf("Stats() = %+v, want %+v", st, tt.stats)
			}
		})
	}
}

// An overflow's gap can show before the queue is seen empty: the kernel
// queues again as soon as a receive empties the queue, so messages sent
// after the dropped ones can be read while the loss is still being drained.
// The overflow's one Lost event covers that gap, and the messages read
// while draining: they are passed over, counted in it, never delivered
// before it (a fork after the gap, applied to a graph that missed the
// gap, linked a stranger's children to a claim's member).
func TestOverflowGapReportedOnce(t *testing.T) {
	var d []byte
	d = appendEvent(d, ptr(onCPU(0, 1, fork(5*sec, 1, 100, 100))), 0)
	d = appendEvent(d, ptr(onCPU(0, 50, fork(6*sec, 1, 101, 101))), 0)
	s := rawSource(t, tableProber{}, d)
	s.lossPending = true // an ENOBUFS was just received
	var kinds []events.Kind
	var lost uint64
	for {
		var ev events.Event
		err := s.Read(&ev)
		if errors.Is(err, errDrained) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == events.Lost {
			lost = ev.Count
		}
	}
	want := []events.Kind{events.Lost}
	if !reflect.DeepEqual(kinds, want) || lost < 2 {
		t.Errorf("events %v (lost %d), want %v counting the 2 forks passed over", kinds, lost, want)
	}
	if st := s.Stats(); st.LostReports != 1 {
		t.Errorf("Stats() = %+v, want one loss report", st)
	}
}

func ptr[T any](v T) *T { return &v }

// truncated is a fork message cut after n bytes, its lengths unchanged
// except nlmsg_len.
func truncated(n int) netlink.Message {
	b := appendEvent(nil, ptr(fork(5*sec, 1, 100, 100)), 0)
	return netlink.Message{Header: netlink.Header{Length: uint32(n), Type: nlmsgDone}, Data: b[nlHdrLen:n]}
}

// truncatedPayload is a message whose cn_msg.len claims more data than the
// message holds.
func truncatedPayload() netlink.Message {
	b := appendEvent(nil, ptr(fork(5*sec, 1, 100, 100)), 0)
	ne.PutUint16(b[nlHdrLen+16:], 200)
	return rawMsg(b)
}

// wrongConnector is a well-formed event under another connector id.
func wrongConnector() netlink.Message {
	b := appendEvent(nil, ptr(fork(5*sec, 1, 100, 100)), 0)
	ne.PutUint32(b[nlHdrLen:], 2)
	return rawMsg(b)
}

func TestReplayCloseSendsIgnore(t *testing.T) {
	s, r := newReplay(t, nil, 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if want := []uint32{mcastListen, mcastIgnore}; !reflect.DeepEqual(r.ops, want) {
		t.Errorf("control ops sent = %v, want %v", r.ops, want)
	}
	var ev events.Event
	if err := s.Read(&ev); !errors.Is(err, events.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestReplaySubscribeRefused(t *testing.T) {
	fn := func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) == 0 {
			return nil, errDrained
		}
		ack := rawEvent{what: whatNone, ack: ne.Uint32(req[0].Data[12:16]) + 1, data: [6]uint32{ackErr: uint32(unix.EPERM)}}
		return []netlink.Message{msg(ack)}, nil
	}
	s := newSource(nltest.Dial(fn), testBoot, tableProber{}, 0)
	err := s.subscribe(0)
	if !errors.Is(err, events.ErrUnavailable) || !errors.Is(err, unix.EPERM) {
		t.Errorf("subscribe with an EPERM ack = %v, want ErrUnavailable wrapping EPERM", err)
	}
}

func TestCheckNamespaces(t *testing.T) {
	tests := []struct {
		name, status, uidMap string
		ok                   bool
	}{
		{"initial", "Name:\tx\nNSpid:\t42\n", "         0          0 4294967295\n", true},
		{"no NSpid line", "Name:\tx\n", "0 0 4294967295\n", true},
		{"nested pid namespace", "NSpid:\t4242\t7\n", "0 0 4294967295\n", false},
		{"user namespace", "NSpid:\t42\n", "0 100000 65536\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Mkdir(root+"/self", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(root+"/self/status", []byte(tt.status), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(root+"/self/uid_map", []byte(tt.uidMap), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkNamespaces(root)
			if tt.ok && err != nil || !tt.ok && !errors.Is(err, events.ErrUnavailable) {
				t.Errorf("checkNamespaces = %v, want ok=%v (else ErrUnavailable)", err, tt.ok)
			}
		})
	}
}
