package proccon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

const (
	// rcvBuf is the receive buffer asked for (SO_RCVBUFFORCE as root, else
	// capped by net.core.rmem_max). One event costs one skb of roughly 0.5-1
	// KiB of truesize, so 8 MiB absorbs a burst of about ten thousand
	// events while Read is behind.
	rcvBuf = 8 << 20
	// ackTimeout bounds New's wait for the kernel's answer to LISTEN. The
	// kernel answers at once; silence means it ignored the request.
	ackTimeout = 2 * time.Second
	// tickNs is one USER_HZ clock tick, the unit of /proc start times.
	tickNs = 10_000_000
	// exitHorizon is how long (in event time) the record of a reported
	// exit is kept to recognise the other threads' exit events of the same
	// process; pruneAt is the map size at which old records are pruned.
	exitHorizon = uint64(60 * time.Second)
	pruneAt     = 1024
	// batch is how many datagrams one recvmmsg(2) takes, each in a slot of
	// slotLen bytes (a proc connector datagram is 76 bytes; a longer one is
	// truncated and counted as a decode error).
	batch   = 64
	slotLen = 256
	// napFor is how long Read sleeps, instead of waiting in the poller to
	// be woken for every message, after a receive found the queue empty
	// while messages keep coming; a nap that finds nothing queued ends the
	// busy stretch and Read waits in the poller again. The kernel wakes a
	// waiting reader for every message, and those wake-ups, not the
	// messages, were most of the CPU per event.
	napFor = 5 * time.Millisecond
	// busyBatch is how many datagrams received within one napFor window
	// make a storm: from there Read naps instead of waiting to be woken.
	busyBatch = 16
)

// Source delivers process events from the netlink proc connector. It is
// created subscribed by New; Read is called from one goroutine, Stats and
// Close from any.
type Source struct {
	conn   *netlink.Conn // the replay tests' conn; a kernel socket is detached into k
	k      *sock         // the kernel socket, out of the runtime's poller; nil on replay
	boot   procfs.BootID
	probe  prober
	offset int64 // CLOCK_BOOTTIME - CLOCK_MONOTONIC in ns, measured at New

	closed atomic.Bool
	stop   chan struct{} // closed by Close: ends a nap
	kick   chan struct{} // Kick: ends a nap
	timer  *time.Timer   // the nap's timer, owned by the Read goroutine

	// The barrier (barrier_linux.go): markers issued by Barrier, and the
	// newest Read met.
	syncIssued, syncSeen atomic.Uint64

	// Counters for Stats.
	nEvents, nLost, nLostReports, nDecodeErrors atomic.Uint64

	// Receive state, owned by the Read goroutine.
	buf        []byte // the current datagram
	n, off     int    // buf[off:n] holds messages not yet decoded
	fromKernel bool   // the datagram in buf was sent by port 0
	rn         int
	rerr       unix.Errno
	readFn     func(fd uintptr) bool
	wait       bool      // recvmmsg blocks (through the poller) on an empty queue
	deadline   time.Time // bounds a wait in the poller (subscribe), zero for none
	busy       bool      // busyBatch datagrams came within napFor: nap when drained
	// got counts the datagrams received since winAt (CLOCK_MONOTONIC ns),
	// the start of the current napFor window.
	got   int
	winAt uint64
	// bat is the batch of datagrams Read takes from; ahead holds those
	// Follows received past it (Read takes them next); into is the
	// one recvmmsg fills.
	bat, ahead, into *batchBuf
	drops            uint32 // socket drop counter (SO_MEMINFO) at the last loss
	lossPending      bool   // ENOBUFS seen, Lost not yet delivered
	discarded        uint64 // messages passed over since, counted in the Lost
	aheadErr         error  // a receive error Follows met, for Read to return
	replay           []byte // marshalled messages on the replay path

	// Decode state, owned by the Read goroutine.
	raw        rawEvent
	pi         procInfo
	exits      map[int32]exitMark
	pruneLimit int // size of exits at which markExit prunes it next
	groups     map[int32]group
	pending    []pendingExit
	now        func() uint64 // CLOCK_MONOTONIC ns; replay tests set their own
	newest     uint64        // newest event timestamp seen
	// seqs is, per CPU, the cn_msg seq the next message sent from that CPU
	// must carry; seqChecked says the message at s.off passed the check.
	seqs       []cpuSeq
	seqChecked bool
}

// cpuSeq follows one CPU's message counter. The kernel numbers the proc
// connector messages it sends from each CPU (cn_msg.seq, from a per-CPU
// counter taken with preemption off, so one CPU's messages reach the queue
// in order), whichever listeners there are; every listener without a filter
// sees every number.
type cpuSeq struct {
	next  uint32
	known bool
}

// maxCPU bounds the CPU numbers followed (the kernel has at most a few
// thousand; an ack of an old kernel names CPU -1).
const maxCPU = 1 << 16

// group is a thread group whose birth the source observed: it has seen the
// creation and the exit of each of its threads since, so it knows when the
// last one exits without asking /proc.
type group struct {
	born     uint64      // event time of its fork
	threads  int32       // live threads: the leader, plus threads created, less threads exited
	threaded bool        // a thread was created in it
	tok      token.Token // the fork's token; zero when the fork could not be bound
}

// exitMark remembers the exit reported for a thread group, so the exit
// events of its other threads are not reported again.
type exitMark struct {
	reported uint64 // event time of the reported exit (CLOCK_MONOTONIC ns)
	born     uint64 // newest fork of the same tgid seen since, 0 if none
}

// pendingExit is a process exit found (its thread group dead) but not yet
// delivered: the exit events of its other threads may still be queued, and
// the last of them carries the time and status of the process's end.
type pendingExit struct {
	tgid, tid, ppid int32
	status          uint32
	ts              uint64 // newest thread exit of the group seen
	seenAt          uint64 // CLOCK_MONOTONIC when the group was seen dead
}

// New opens a proc connector socket, joins the CN_IDX_PROC multicast group
// and subscribes (PROC_CN_MCAST_LISTEN), waiting for the kernel's ack. From
// the moment New returns, every fork, exec and exit on the host is buffered
// for Read; events the kernel sent before the ack are discarded, since a
// /proc scan done after New sees their effects. boot is the current boot id,
// put into tokens.
//
// Errors wrap events.ErrUnavailable when the mechanism cannot run here: not
// in the initial pid and user namespaces, no CAP_NET_ADMIN, or a kernel
// without CONFIG_CONNECTOR / CONFIG_PROC_EVENTS.
func New(boot procfs.BootID) (*Source, error) {
	if err := checkNamespaces("/proc"); err != nil {
		return nil, err
	}
	c, err := netlink.Dial(unix.NETLINK_CONNECTOR, nil)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, unavailable("kernel without CONFIG_CONNECTOR", err)
		}
		return nil, fmt.Errorf("proc connector: dial: %w", err)
	}
	// Config.Groups would do the same at bind(2) time (it is a bitmask in
	// which CN_IDX_PROC happens to be bit 0); JoinGroup names the group by
	// its id and reports a permission failure by itself.
	if err := c.JoinGroup(cnIdxProc); err != nil {
		c.Close()
		if errors.Is(err, unix.EPERM) {
			return nil, unavailable("joining the proc connector group needs CAP_NET_ADMIN", err)
		}
		return nil, fmt.Errorf("proc connector: join group %d: %w", cnIdxProc, err)
	}
	// Best effort: a smaller buffer only makes loss likelier, and loss is
	// reported.
	_ = c.SetReadBuffer(rcvBuf)
	probe, err := newKernelProber()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("proc connector: %w", err)
	}
	s := newSource(c, boot, probe, clockOffset())
	if err := s.detach(); err != nil {
		c.Close()
		return nil, err
	}
	if err := s.subscribe(ackTimeout); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newSource wraps a connected conn. Replay tests pass an nltest conn, a
// table prober and a fixed clock offset; a kernel socket is then detached
// (Source.detach) before use.
func newSource(c *netlink.Conn, boot procfs.BootID, p prober, offset int64) *Source {
	s := &Source{
		conn:       c,
		boot:       boot,
		probe:      p,
		offset:     offset,
		stop:       make(chan struct{}),
		kick:       make(chan struct{}, 1),
		timer:      time.NewTimer(time.Hour),
		exits:      make(map[int32]exitMark),
		pruneLimit: pruneAt,
		groups:     make(map[int32]group),
	}
	s.timer.Stop()
	s.now = monotonicNow
	if _, err := c.SyscallConn(); err == nil {
		s.readFn = s.recvmmsg
		s.bat, s.ahead = newBatchBuf(), newBatchBuf()
	}
	return s
}

// batchBuf is one recvmmsg(2) batch: up to batch datagrams in reused
// slots, with their senders' addresses; bn received, the next to read at
// bi.
type batchBuf struct {
	bi, bn int
	slots  []byte
	iov    []unix.Iovec
	names  []unix.RawSockaddrNetlink
	hdrs   []unix.Mmsghdr
}

func newBatchBuf() *batchBuf {
	b := &batchBuf{
		slots: make([]byte, batch*slotLen),
		iov:   make([]unix.Iovec, batch),
		names: make([]unix.RawSockaddrNetlink, batch),
		hdrs:  make([]unix.Mmsghdr, batch),
	}
	for i := range b.hdrs {
		b.iov[i].Base = &b.slots[i*slotLen]
		b.iov[i].SetLen(slotLen)
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iov[i]
		h.SetIovlen(1)
	}
	return b
}

// datagram returns datagram i, and false when Read drops it: truncated,
// or not sent by the kernel (port id 0).
func (b *batchBuf) datagram(i int) ([]byte, bool) {
	h := &b.hdrs[i]
	if h.Hdr.Flags&unix.MSG_TRUNC != 0 || int(h.Len) > slotLen {
		return nil, false
	}
	return b.slots[i*slotLen : i*slotLen+int(h.Len)], b.names[i].Family == unix.AF_NETLINK && b.names[i].Pid == 0
}

// followsIn reports what the datagrams from i on tell of process tgid.
func (b *batchBuf) followsIn(i int, tgid int32) Follow {
	var f Follow
	for ; i < b.bn; i++ {
		if d, ok := b.datagram(i); ok {
			f |= followsIn(d, tgid)
		}
	}
	return f
}

// detach takes a kernel socket out of the runtime's poller (see sock).
func (s *Source) detach() error {
	rc, err := s.conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("proc connector: %w", err)
	}
	k, err := detach(s.conn, rc)
	if err != nil {
		return err
	}
	s.k = k
	return nil
}

func unavailable(reason string, err error) error {
	if err == nil {
		return fmt.Errorf("%w: proc connector: %s", events.ErrUnavailable, reason)
	}
	return fmt.Errorf("%w: proc connector: %s: %w", events.ErrUnavailable, reason, err)
}

// checkNamespaces fails unless the process runs in the initial pid and user
// namespaces: the kernel silently ignores LISTEN from anywhere else.
func checkNamespaces(proc string) error {
	status, err := os.ReadFile(proc + "/self/status")
	if err != nil {
		return fmt.Errorf("proc connector: %w", err)
	}
	if nspid, ok := procfs.LineValue(status, "NSpid:"); ok && len(bytes.Fields(nspid)) > 1 {
		return unavailable(fmt.Sprintf("not in the initial pid namespace (NSpid %s): the proc connector reports only there", nspid), nil)
	}
	uidMap, err := os.ReadFile(proc + "/self/uid_map")
	if err != nil {
		return fmt.Errorf("proc connector: %w", err)
	}
	if f := bytes.Fields(uidMap); len(f) != 3 || string(f[0]) != "0" || string(f[1]) != "0" || string(f[2]) != "4294967295" {
		return unavailable("not in the initial user namespace: the proc connector reports only there", nil)
	}
	return nil
}

// clockOffset measures CLOCK_BOOTTIME - CLOCK_MONOTONIC: the time the
// machine spent suspended. Event timestamps are monotonic; start times in
// /proc count boot time.
func clockOffset() int64 {
	var m1, b, m2 unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &b)
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
	return b.Nano() - (m1.Nano()+m2.Nano())/2
}

func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// subscribe sends PROC_CN_MCAST_LISTEN and waits for the kernel's ack,
// which is multicast to every listener and recognised by its ack field.
func (s *Source) subscribe(timeout time.Duration) error {
	// The kernel echoes ack+1 but replaces seq with its own per-CPU
	// counter, so a nonce in ack tells our ack from other listeners'.
	ack := s.pid() ^ uint32(time.Now().UnixNano())
	if err := s.control(mcastListen, s.pid(), ack); err != nil {
		return fmt.Errorf("proc connector: send listen: %w", err)
	}
	if s.k != nil {
		s.deadline = time.Now().Add(timeout)
		defer func() {
			// Out of the poller until Read waits: messages queued
			// before the first Read wake nobody.
			s.deadline = time.Time{}
			s.k.unwait()
		}()
	}
	for {
		err := s.receive(true)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return unavailable("no answer to PROC_CN_MCAST_LISTEN (kernel without CONFIG_PROC_EVENTS?)", err)
		case errors.Is(err, unix.ENOBUFS):
			continue // losses before the ack precede the attach
		case err != nil:
			return fmt.Errorf("proc connector: wait for ack: %w", err)
		}
		for s.off < s.n {
			next, err := parseMessage(s.buf[s.off:s.n], &s.raw)
			s.off += next
			if err != nil || !s.fromKernel || s.raw.what != whatNone || s.raw.ack != ack+1 {
				continue
			}
			s.off = s.n // events after the ack in the same datagram are not expected
			if e := s.raw.data[ackErr]; e != 0 {
				errno := unix.Errno(e)
				if errno == unix.EPERM {
					return unavailable("listening needs CAP_NET_ADMIN", errno)
				}
				return unavailable("kernel refused PROC_CN_MCAST_LISTEN", errno)
			}
			s.drops, _ = s.dropCount()
			// The ack is numbered like every message: its CPU's count
			// starts here, the others' at their first message.
			s.checkSeq(&s.raw)
			return nil
		}
	}
}

// pid is the socket's netlink port id.
func (s *Source) pid() uint32 {
	if s.k != nil {
		return s.k.pid
	}
	return s.conn.PID()
}

// controlMsg is a PROC_CN_MCAST_* request to the kernel.
func controlMsg(op, seq, ack uint32) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: nlmsgDone},
		Data:   appendControl(make([]byte, 0, cnMsgLen+4), op, seq, ack),
	}
}

// control sends a PROC_CN_MCAST_* request to the kernel.
func (s *Source) control(op, seq, ack uint32) error {
	if s.k != nil {
		return s.k.send(controlMsg(op, seq, ack))
	}
	_, err := s.conn.Send(controlMsg(op, seq, ack))
	return err
}

// Mechanism returns events.Netlink.
func (s *Source) Mechanism() events.Mechanism { return events.Netlink }

// Stats returns the counters so far. Events counts fork, exec and exit
// events delivered; Lost events are counted in LostReports only.
func (s *Source) Stats() events.Stats {
	return events.Stats{
		Events:       s.nEvents.Load(),
		Lost:         s.nLost.Load(),
		LostReports:  s.nLostReports.Load(),
		DecodeErrors: s.nDecodeErrors.Load(),
	}
}

// Close unsubscribes (PROC_CN_MCAST_IGNORE, best effort) and closes the
// socket. A Read in another goroutine returns events.ErrClosed at once,
// whether it waits for a message (closing the socket wakes it) or naps
// (Close ends the nap); no further kernel message is needed.
func (s *Source) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	if s.k != nil {
		ignore := controlMsg(mcastIgnore, s.k.pid, 0)
		return s.k.close(&ignore)
	}
	_ = s.control(mcastIgnore, s.conn.PID(), 0)
	if err := s.conn.Close(); err != nil {
		return fmt.Errorf("proc connector: close: %w", err)
	}
	return nil
}

// Read blocks until the next fork, exec, exit or loss and fills ev. It
// returns events.ErrClosed after Close. Messages that do not decode or do
// not come from the kernel are counted in Stats.DecodeErrors and skipped.
//
// After a socket buffer overflow the kernel fails one receive with ENOBUFS
// and then drops everything until the queue has been drained. Read goes on
// draining, passing over what it reads, and delivers one events.Lost event
// once the queue is empty (the kernel queues events again from then on),
// with Count the number of messages the socket dropped (its SO_MEMINFO
// drop counter) and those passed over; a resync started on it misses
// nothing after it. What is read while draining is not delivered: the
// kernel queues again as soon as a receive empties the queue, so messages
// sent after the dropped ones come before the queue is seen empty, and a
// fork among them, applied to a graph that had missed the exit of the
// pid's last holder and the fork that reused it, made a stranger's
// children members of a claim (a user renaming processes in a loop
// overflowed the socket at will).
func (s *Source) Read(ev *events.Event) error {
	for {
		if s.closed.Load() {
			return events.ErrClosed
		}
		if err := s.aheadErr; err != nil {
			s.aheadErr = nil
			return fmt.Errorf("proc connector: receive: %w", err)
		}
		if s.off < s.n {
			next, err := parseMessage(s.buf[s.off:s.n], &s.raw)
			if s.lossPending {
				// Either side of the gap: passed over (see above).
				s.off += next
				s.seqChecked = false
				if err == nil {
					s.discarded++
				}
				continue
			}
			if err == nil && !s.fromKernel {
				err = errNotKernel
			}
			if err == nil && !s.seqChecked {
				if gap := s.checkSeq(&s.raw); gap > 0 && !s.lossPending {
					// Lost goes out first; the message is handled
					// on the next call, past the check.
					s.seqChecked = true
					s.gapLost(ev, gap, s.raw.ts)
					return nil
				}
				// During an overflow the kernel queues again as soon as
				// a receive empties the queue, so a gap can show before
				// Read sees the queue empty: the overflow's Lost event
				// covers it.
			}
			if err == nil && s.flushBefore(&s.raw, ev) {
				s.seqChecked = true
				s.nEvents.Add(1)
				return nil // the message is handled on the next call
			}
			s.off += next
			s.seqChecked = false
			if err != nil {
				s.nDecodeErrors.Add(1)
				continue
			}
			if s.handle(&s.raw, ev) {
				if ev.Kind != events.Lost {
					s.nEvents.Add(1)
				}
				return nil
			}
			continue
		}
		err := s.receive(false)
		switch {
		case err == nil:
			continue
		case s.closed.Load():
			return events.ErrClosed
		case errors.Is(err, unix.ENOBUFS):
			// Messages read from here until the queue is drained may lie
			// on either side of the gap: thread counts cannot be trusted
			// across it.
			s.lossPending = true
			clear(s.groups)
			continue
		case !errors.Is(err, unix.EAGAIN):
			return fmt.Errorf("proc connector: receive: %w", err)
		}
		// The queue is drained: a loss is over, and the exit events of
		// every thread of a dead group have been seen.
		if s.lossPending {
			s.lost(ev)
			return nil
		}
		if left := s.holdLeft(); left > 0 && s.k != nil {
			// The last thread's exit may still be on its way from another
			// CPU: wait a little for it before the process's exit goes out
			// with an earlier thread's status.
			s.nap(min(left, napFor))
			continue
		}
		if s.flush(ev, -1) {
			s.nEvents.Add(1)
			return nil
		}
		if s.busy && s.k != nil {
			// Messages keep coming: let them gather instead of being
			// woken for each.
			s.busy = false
			s.nap(napFor)
			continue
		}
		if err := s.receive(true); err != nil {
			if s.closed.Load() {
				return events.ErrClosed
			}
			if errors.Is(err, unix.ENOBUFS) {
				s.lossPending = true
				clear(s.groups)
				continue
			}
			return fmt.Errorf("proc connector: receive: %w", err)
		}
	}
}

// Follows reports what the kernel has queued of process tgid after the
// message of the event Read returned last (see Follow): the process has
// run another program, changed its ids or session, or renamed itself
// since, so what /proc shows of it is no longer, in that respect, what
// the event's process was (the tracker then leaves what it cannot prove
// absent). Call it after reading /proc: a change made before the read had
// queued its message by then, but for the few microseconds between the
// kernel making the change and sending the message. (A process its tracer
// holds at the exec, PTRACE_EVENT_EXEC, stops before the message: procctx
// fails such a read with ErrInExec.) What the kernel does not report
// cannot be seen here: a chdir, a setgroups or setpgid alone, a move to
// another cgroup, arguments rewritten in the process's memory.
//
// It parses the messages received and not yet read, then receives what
// the socket queued since, without waiting, into the look-ahead batch
// (Read takes those next; an overflow or error met there is Read's, as if
// its own receive had met it). It sees at most a batch (64 datagrams) past
// the one being read: when more were queued, or messages were lost (an
// overflow, or one during the look-ahead), it reports FollowUnknown, and
// what it did not see may have happened. Read's goroutine only.
func (s *Source) Follows(tgid int32) Follow {
	var f Follow
	if s.fromKernel && s.off < s.n {
		f |= followsIn(s.buf[s.off:s.n], tgid)
	}
	if s.k == nil {
		return f | FollowUnknown // replay: what comes next is not known
	}
	f |= s.bat.followsIn(s.bat.bi, tgid) | s.ahead.followsIn(0, tgid)
	b := s.ahead
	switch {
	case f&FollowExec != 0:
		return f
	case b.bn == len(b.hdrs) || s.lossPending || s.aheadErr != nil:
		return f | FollowUnknown
	}
	from, room := b.bn, len(b.hdrs)-b.bn
	s.into, s.rerr, s.rn, s.wait = b, 0, 0, false
	if err := s.k.recv(s.readFn); err != nil {
		return f | FollowUnknown // closed: Read sees it
	}
	switch s.rerr {
	case 0:
	case unix.EAGAIN:
		return f // the queue was empty: everything was seen
	case unix.ENOBUFS:
		// As Read does: the messages from here on may lie on either side
		// of the gap.
		s.lossPending = true
		clear(s.groups)
		return f | FollowUnknown
	default:
		s.aheadErr = s.rerr
		return f | FollowUnknown
	}
	b.bn += s.rn
	s.count(s.rn)
	f |= b.followsIn(from, tgid)
	if s.rn == room {
		return f | FollowUnknown // more may wait behind
	}
	// Fewer than asked: the queue was empty, unless an overflow stopped
	// the receive (the kernel reports it at the next one; its drop
	// counter tells now).
	if d, ok := s.dropCount(); !ok || d != s.drops {
		return f | FollowUnknown
	}
	return f
}

// followsIn reports what the messages in b tell of process tgid: an exec
// of it, a change of a thread's ids or of its session, a rename of its
// main thread (the name /proc shows), a thread's exit.
func followsIn(b []byte, tgid int32) Follow {
	var r rawEvent
	var f Follow
	for len(b) > 0 {
		next, err := parseMessage(b, &r)
		if err == nil && int32(r.data[1]) == tgid {
			switch r.what {
			case whatExec:
				f |= FollowExec
			case whatUID, whatGID:
				f |= FollowIDs
			case whatSID:
				f |= FollowSession
			case whatComm:
				if int32(r.data[0]) == tgid {
					f |= FollowComm
				}
			case whatExit:
				f |= FollowExit
			}
		}
		if next <= 0 {
			return f
		}
		b = b[next:]
	}
	return f
}

// nap sleeps for d or until Close, with the socket out of the runtime's
// poller, so that the messages queued meanwhile wake nobody.
func (s *Source) nap(d time.Duration) {
	s.k.unwait()
	s.timer.Reset(d)
	select {
	case <-s.timer.C:
	case <-s.stop:
		s.timer.Stop()
	case <-s.kick:
		s.timer.Stop()
	}
}

// lost fills ev with a Lost event at the end of an overflow, and forgets
// the exit records: the gap may hide forks that separate generations.
func (s *Source) lost(ev *events.Event) {
	s.lossPending = false
	count := s.discarded
	s.discarded = 0
	if d, ok := s.dropCount(); ok {
		count += uint64(d - s.drops)
		s.drops = d
	}
	s.nLost.Add(max(count, 1))
	s.nLostReports.Add(1)
	clear(s.exits)
	// The dropped messages leave a gap in every CPU's numbers; the count
	// above covers it, so each CPU's next message starts its count anew.
	for i := range s.seqs {
		s.seqs[i].known = false
	}
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &now)
	*ev = events.Event{Kind: events.Lost, Mechanism: events.Netlink, Count: count, Time: uint64(now.Nano())}
}

// exitHold is how long a dead thread group's exit is held for the exit
// events of its other threads, which the kernel sends from their own CPUs.
const exitHold = 20 * time.Millisecond

// holdLeft is how much longer the oldest pending exit should be held.
func (s *Source) holdLeft() time.Duration {
	if len(s.pending) == 0 {
		return 0
	}
	oldest := s.pending[0].seenAt
	for _, p := range s.pending[1:] {
		oldest = min(oldest, p.seenAt)
	}
	return time.Duration(int64(oldest) + int64(exitHold) - int64(s.now()))
}

// receive makes the next datagram current (s.buf[:s.n]): the next of the
// batch already received, else the first of a new batch. Without wait it
// returns EAGAIN when the socket queue is empty; with wait it blocks in the
// runtime's poller, which Close wakes.
func (s *Source) receive(wait bool) error {
	s.n, s.off, s.seqChecked = 0, 0, false
	if s.k == nil {
		if !wait {
			return unix.EAGAIN
		}
		return s.receiveMessages()
	}
	b := s.bat
	if b.bi >= b.bn && s.ahead.bn > 0 {
		// What Follows received past the batch (counted then).
		s.bat, s.ahead = s.ahead, b
		b.bi, b.bn = 0, 0
		b = s.bat
	}
	if b.bi >= b.bn {
		b.bi, b.bn, s.rerr, s.rn = 0, 0, 0, 0
		s.into = b
		if err := s.fill(wait); err != nil {
			return err
		}
		if s.rerr != 0 {
			return s.rerr
		}
		b.bn = s.rn
		if b.bn == 0 {
			return unix.EAGAIN
		}
		s.count(b.bn)
	}
	i := b.bi
	b.bi++
	d, fromKernel := b.datagram(i)
	if d == nil {
		// The datagram did not fit; nothing in it can be trusted.
		s.nDecodeErrors.Add(1)
		return nil
	}
	s.buf, s.n, s.fromKernel = d, len(d), fromKernel
	return nil
}

// fill receives the next batch of datagrams: without wait one raw,
// non-blocking recvmmsg(2); with wait the same call made through the
// runtime's poller (which puts the socket there; see sock), which waits
// while the queue is empty.
func (s *Source) fill(wait bool) error {
	if !wait {
		s.wait = false
		return s.k.recv(s.readFn)
	}
	rc, err := s.k.waiter(s.deadline)
	if err != nil {
		return err
	}
	s.wait = true
	return rc.Read(s.readFn)
}

// count adds n datagrams received to the current napFor window, and
// decides whether the traffic is a storm: busyBatch datagrams or more
// within one window, whether one receive took them all (Read was behind)
// or each woke Read on its own (Read kept up, woken by the kernel for
// every message). Under lighter traffic Read is woken at once, so a
// short-lived child's fork is still read while the child lives and keeps
// its token.
func (s *Source) count(n int) {
	now := s.now()
	if now-s.winAt > uint64(napFor) {
		s.winAt, s.got = now, 0
	}
	s.got += n
	s.busy = s.got >= busyBatch
}

// recvmmsg is the syscall.RawConn read function: one recvmmsg(2) of as
// many datagrams as s.into has free slots (past its bn), with their
// senders' addresses, without allocating; s.rn is how many came.
func (s *Source) recvmmsg(fd uintptr) bool {
	hdrs := s.into.hdrs[s.into.bn:]
	for i := range hdrs {
		hdrs[i].Hdr.Namelen = unix.SizeofSockaddrNetlink
		hdrs[i].Hdr.Flags = 0
		hdrs[i].Len = 0
	}
	for {
		// Raw: MSG_DONTWAIT never blocks, and the runtime need not be
		// told of a call that returns at once.
		n, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, fd,
			uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			s.rn = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if !s.wait {
				s.rerr = errno
				return true
			}
			return false
		}
		s.rerr = errno
		return true
	}
}

// receiveMessages is the receive path for a conn without a socket (nltest):
// the messages are marshalled back into their wire form. The sender's
// address is unknown there; only nlmsg_pid and the connector id are checked.
func (s *Source) receiveMessages() error {
	msgs, err := s.conn.Receive()
	if err != nil {
		return err
	}
	s.replay = s.replay[:0]
	for _, m := range msgs {
		b, err := m.MarshalBinary()
		if err != nil {
			s.nDecodeErrors.Add(1)
			continue
		}
		s.replay = append(s.replay, b...)
	}
	s.buf = append(s.buf[:0], s.replay...)
	s.n = len(s.buf)
	s.fromKernel = true
	return nil
}

// dropCount reads the socket's drop counter (SO_MEMINFO), which the kernel
// increments for every message it could not queue.
func (s *Source) dropCount() (uint32, bool) {
	if s.k == nil {
		return 0, false
	}
	return s.k.dropCount()
}

// ticks converts an event's CLOCK_MONOTONIC timestamp to clock ticks since
// boot, the unit of /proc start times.
func (s *Source) ticks(ts uint64) uint64 { return s.bootNs(ts) / tickNs }

func (s *Source) bootNs(ts uint64) uint64 { return uint64(int64(ts) + s.offset) }

// handle turns one decoded proc_event into ev, or reports false for events
// that are not delivered (acks, threads, kinds not used). ev may be a Lost
// event: an exit /proc could not classify.
func (s *Source) handle(r *rawEvent, ev *events.Event) bool {
	if r.ts > s.newest {
		s.newest = r.ts
	}
	switch r.what {
	case whatFork:
		child, tgid := int32(r.data[forkChildPid]), int32(r.data[forkChildTgid])
		parent := int32(r.data[forkParentTgid])
		if child <= 0 || tgid <= 0 || parent < 0 {
			s.nDecodeErrors.Add(1)
			return false
		}
		if child != tgid {
			// A new thread, not a new process; counted in its group.
			if g, ok := s.groups[tgid]; ok {
				g.threads++
				g.threaded = true
				s.groups[tgid] = g
			}
			return false
		}
		s.noteBirth(child, r.ts)
		*ev = events.Event{Kind: events.Fork, Mechanism: events.Netlink, Pid: child, PPid: parent, Time: s.bootNs(r.ts)}
		s.identify(ev, parent, r.ts)
		if !s.lossPending {
			s.groups[child] = group{born: r.ts, threads: 1, tok: ev.Token}
		}
		return true
	case whatExec:
		pid, tgid := int32(r.data[execPid]), int32(r.data[execTgid])
		if tgid <= 0 || pid <= 0 {
			s.nDecodeErrors.Add(1)
			return false
		}
		*ev = events.Event{Kind: events.Exec, Mechanism: events.Netlink, Pid: tgid, Time: s.bootNs(r.ts)}
		if pid != tgid {
			ev.Tid = pid
		}
		s.identify(ev, -1, r.ts)
		if !s.execProven(ev, r.ts) {
			ev.Token, ev.Comm, ev.PPid = token.Token{}, [16]byte{}, 0
		}
		return true
	case whatExit:
		pid, tgid := int32(r.data[exitPid]), int32(r.data[exitTgid])
		if tgid <= 0 || pid <= 0 {
			s.nDecodeErrors.Add(1)
			return false
		}
		if g, ok := s.groups[tgid]; ok && r.ts >= g.born {
			return s.groupExit(tgid, pid, g, r, ev)
		}
		switch s.groupDead(tgid, r.ts) {
		case alive:
			return false
		case unsure:
			// Neither a false exit nor a silent miss: a loss of one
			// event, which makes the consumer resync from /proc.
			s.uncertain(ev, r.ts)
			return true
		}
		if s.delivered(tgid, r.ts) {
			return false
		}
		s.addPending(tgid, pid, r)
		return false
	case whatComm:
		if n, ok := s.marker(r); ok && n > s.syncSeen.Load() {
			s.syncSeen.Store(n) // only this goroutine stores
		}
	}
	return false // PROC_EVENT_NONE (acks) and kinds the source does not use
}

// groupExit counts the exit of thread pid in the observed group tgid and
// fills ev with the process's exit when it was the last thread. The count
// is exact and needs no /proc read and no wait: the kernel sends a thread's
// creation before the thread runs (so before its exit), every creation and
// exit of the group came after its fork, and a message the socket did not
// get is seen (ENOBUFS, or a gap in its CPU's numbers) and clears every
// count before the next message is counted.
func (s *Source) groupExit(tgid, pid int32, g group, r *rawEvent, ev *events.Event) bool {
	g.threads--
	if g.threads > 0 {
		s.groups[tgid] = g
		return false
	}
	delete(s.groups, tgid)
	s.markExit(tgid, r.ts)
	*ev = events.Event{
		Kind: events.Exit, Mechanism: events.Netlink, Pid: tgid,
		PPid: int32(r.data[exitPTgid]), Status: r.data[exitCode], Time: s.bootNs(r.ts),
	}
	if pid != tgid {
		ev.Tid = pid
	}
	return true
}

// identify fills ev's Token, Comm (and PPid for exec) from the process now
// at ev.Pid, but only when it is provably the event's process: bound through
// a pidfd, started no later than the event (one tick of slack), and, for a
// fork, still the child of the event's parent, or adopted with no exit of
// it queued (Follows). Otherwise the Token stays zero: the pid was
// reissued, or the child already exited, and its start time cannot be
// learned.
func (s *Source) identify(ev *events.Event, parent int32, ts uint64) {
	if err := s.probe.bind(ev.Pid, &s.pi); err != nil {
		return
	}
	st := &s.pi.Stat
	if st.Pid != ev.Pid || st.StartTime > s.ticks(ts)+1 {
		return
	}
	if parent >= 0 && st.PPid != parent && s.Follows(ev.Pid)&(FollowExit|FollowUnknown) != 0 {
		// Not the event's parent's child now: adopted since (its parent
		// exited), or a successor at the pid born of another. The kernel
		// sends the child's exit before its pid can be reissued, so a
		// look-ahead that saw the whole queue without one proves it the
		// child, adopted.
		return
	}
	if parent < 0 {
		ev.PPid = st.PPid
	}
	ev.Token = token.Token{Boot: s.boot, Start: st.StartTime, Ino: s.pi.Ino, Prec: token.Ticks}
	ev.Comm = st.Comm
}

// execProven reports whether the instance identify bound for the exec
// event ev at ts is the one that exec'd, not a successor: the exec'ing
// process may have exited since, been reaped, and its pid been reissued
// (clone3 set_tid, ns_last_pid) within the tick of slack identify allows;
// its successor (a fresh fork that has not exec'd yet shows its parent's
// arguments) would then get the exec, its token and its context. The
// kernel sends a process's exit before its pid can be reissued, so every
// event before that exit is of the instance that held the pid: a process
// whose fork the source observed (no loss since) is proven by the fork's
// token (the pidfs inode tells two instances of one tick apart), and one
// whose fork went unbound (gone or reparented at the read) is not proven
// at all. Any other was born before the source or its last loss: a
// successor was born after the exec, so a start time two ticks before the
// exec's (one for the clock conversion) proves it; a later one does not.
// A token that does not hold is dropped: the exec is then the graph's
// live instance's, and the event carries no context.
func (s *Source) execProven(ev *events.Event, ts uint64) bool {
	if ev.Token.IsZero() {
		return true
	}
	if g, ok := s.groups[ev.Pid]; ok && ts >= g.born {
		return !g.tok.IsZero() && g.tok.Start == ev.Token.Start && g.tok.Ino == ev.Token.Ino
	}
	return ev.Token.Start+2 <= s.ticks(ts)
}

// liveness is what /proc says of a thread group after one of its threads
// exited.
type liveness uint8

const (
	dead   liveness = iota // no thread of the group is left
	alive                  // the same instance still has a live thread
	unsure                 // /proc cannot tell
)

// groupDead tells whether the thread group tgid has a live thread left
// after a thread of it exited at ts. The proc connector sends an exit for
// every thread and does not say which was the last, so /proc decides: the
// group is dead when tgid is gone, is held by a process started after the
// event (reissued), or is a zombie leader with no other thread; it is
// alive when the process at tgid started before the event's tick (so it
// held tgid at the event) and has a live thread. A failed read, or a
// process started within the event's tick (a reissue or the same group:
// ticks cannot tell), is unsure.
func (s *Source) groupDead(tgid int32, ts uint64) liveness {
	err := s.probe.stat(tgid, &s.pi)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return dead
	case err != nil:
		return unsure
	case s.pi.Stat.StartTime > s.ticks(ts)+1:
		return dead
	case s.pi.Threads <= 1 && s.pi.Stat.Zombie():
		return dead
	case s.pi.Stat.StartTime+1 >= s.ticks(ts):
		return unsure
	}
	return alive
}

// delivered reports whether an exit of tgid at ts belongs to a generation
// whose exit was already delivered. Two exits of the same tgid are of
// different generations only if a fork of tgid was seen between them.
func (s *Source) delivered(tgid int32, ts uint64) bool {
	m, ok := s.exits[tgid]
	if !ok {
		return false
	}
	lo, hi := min(m.reported, ts), max(m.reported, ts)
	return m.born <= lo || m.born >= hi
}

// markExit records the delivered exit of tgid at ts.
func (s *Source) markExit(tgid int32, ts uint64) {
	if len(s.exits) >= s.pruneLimit {
		for pid, m := range s.exits {
			if m.reported+exitHorizon < s.newest {
				delete(s.exits, pid)
			}
		}
		// Prune again only once the map has grown by as much again, so
		// a minute of busy host does not cost a map walk per exit.
		s.pruneLimit = max(pruneAt, 2*len(s.exits))
	}
	s.exits[tgid] = exitMark{reported: ts}
}

// addPending records that the thread group tgid is dead after the exit of
// its thread pid, keeping the newest thread exit as the process's end.
func (s *Source) addPending(tgid, pid int32, r *rawEvent) {
	i := 0
	for i < len(s.pending) && s.pending[i].tgid != tgid {
		i++
	}
	if i == len(s.pending) {
		s.pending = append(s.pending, pendingExit{tgid: tgid, seenAt: s.now()})
	} else if r.ts < s.pending[i].ts {
		return
	}
	p := &s.pending[i]
	p.tid, p.ppid, p.status, p.ts = 0, int32(r.data[exitPTgid]), r.data[exitCode], r.ts
	if pid != tgid {
		p.tid = pid
	}
}

// flushBefore delivers a pending exit that must precede the message r: r
// was sent after the group was seen dead (so every thread's exit event came
// before it), r is the fork of a new process at the same tgid, or r is a
// barrier's marker sent after the exit (a request that synced must see
// it; a thread's exit that comes after the marker then repeats it, and is
// dropped as a straggler).
func (s *Source) flushBefore(r *rawEvent, ev *events.Event) bool {
	best := -1
	marker := false
	if r.what == whatComm && len(s.pending) > 0 {
		_, marker = s.marker(r)
	}
	for i := range s.pending {
		p := &s.pending[i]
		due := p.seenAt < r.ts || marker && p.ts < r.ts ||
			(r.what == whatFork && int32(r.data[forkChildTgid]) == p.tgid && r.data[forkChildPid] == r.data[forkChildTgid])
		if due && (best < 0 || p.ts < s.pending[best].ts) {
			best = i
		}
	}
	return best >= 0 && s.flush(ev, best)
}

// flush delivers pending exit i, or the oldest one when i < 0.
func (s *Source) flush(ev *events.Event, i int) bool {
	if len(s.pending) == 0 {
		return false
	}
	if i < 0 {
		i = 0
		for j := range s.pending {
			if s.pending[j].ts < s.pending[i].ts {
				i = j
			}
		}
	}
	p := s.pending[i]
	s.pending[i] = s.pending[len(s.pending)-1]
	s.pending = s.pending[:len(s.pending)-1]
	s.markExit(p.tgid, p.ts)
	*ev = events.Event{
		Kind: events.Exit, Mechanism: events.Netlink, Pid: p.tgid, Tid: p.tid,
		PPid: p.ppid, Status: p.status, Time: s.bootNs(p.ts),
	}
	return true
}

// noteBirth records a fork of tgid at ts as a generation boundary for
// markExit.
func (s *Source) noteBirth(tgid int32, ts uint64) {
	if m, ok := s.exits[tgid]; ok && ts > m.born {
		m.born = ts
		s.exits[tgid] = m
	}
}

// checkSeq follows r's CPU's message numbers and returns how many messages
// of that CPU were sent but never reached the socket since the last one
// seen from it. The first message of a CPU starts its count. A message
// numbered at or before the last one seen is handled as it is: kernels
// before about 4.3 could queue one CPU's messages out of order (the kernel never
// sends one twice, and other senders are refused by port id), and there
// the gap it left was reported as a loss, a false alarm but never a
// silent miss. A CPU number beyond maxCPU is not followed.
func (s *Source) checkSeq(r *rawEvent) uint32 {
	if r.cpu >= maxCPU {
		return 0
	}
	c := int(r.cpu)
	if c >= len(s.seqs) {
		s.seqs = append(s.seqs, make([]cpuSeq, c+1-len(s.seqs))...)
	}
	e := &s.seqs[c]
	if !e.known {
		e.next, e.known = r.seq+1, true
		return 0
	}
	gap := r.seq - e.next
	if int32(gap) < 0 {
		return 0
	}
	e.next = r.seq + 1
	return gap
}

// gapLost fills ev with the Lost event for n messages the kernel numbered
// but the socket never got (it failed to allocate or queue them without an
// overflow being reported). Any of them may have been a thread's creation
// or exit, or a fork between two generations of a pid: counts and exit
// records are dropped.
func (s *Source) gapLost(ev *events.Event, n uint32, ts uint64) {
	s.nLost.Add(uint64(n))
	s.nLostReports.Add(1)
	clear(s.groups)
	clear(s.exits)
	*ev = events.Event{Kind: events.Lost, Mechanism: events.Netlink, Count: uint64(n), Time: s.bootNs(ts)}
}

// uncertain fills ev with the Lost event for one exit message that /proc
// could not classify: it may have ended a process.
func (s *Source) uncertain(ev *events.Event, ts uint64) {
	s.nLost.Add(1)
	s.nLostReports.Add(1)
	*ev = events.Event{Kind: events.Lost, Mechanism: events.Netlink, Count: 1, Time: s.bootNs(ts)}
}
