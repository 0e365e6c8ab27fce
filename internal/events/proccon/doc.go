// Package proccon is the event source over the Linux netlink proc connector
// (CN_IDX_PROC): the kernel multicasts a small record for every fork, exec
// and exit on the host to sockets that joined the group and sent
// PROC_CN_MCAST_LISTEN. New subscribes and waits for the kernel's ack, so
// events are buffered from then on (attach, scan /proc, drain).
//
// Trust: a message is accepted only from the kernel. mdlayher/netlink's
// Receive does not expose the sender's address, so the source reads the
// socket itself through Conn.SyscallConn with recvmmsg(2) into reused
// buffers (which also keeps the hot path free of allocations) and requires
// sender port id 0; it also requires nlmsg_pid 0, type NLMSG_DONE and the
// connector id CN_IDX_PROC/CN_VAL_PROC. Only a CAP_NET_ADMIN process can
// send to a connector socket at all. Anything else is counted as a decode
// error and dropped.
//
// Events carry pids and a CLOCK_MONOTONIC timestamp, no start time. Tokens
// are therefore read from /proc after the fact, through a pidfd held across
// the read (with the pidfs inode where the kernel has pidfs), and trusted
// only when they fit the event: the process started no later than the event
// (converted to boot-time ticks with an offset measured at New, one tick of
// slack) and, for a fork, its parent is still the event's parent, or it was
// adopted (its parent exited) and no exit of it is queued behind the fork
// (Follows: the kernel sends a process's exit before its pid can be
// reissued, so none queued, the whole queue seen, rules out a successor). A
// child that already exited, or a pid that was reissued, gets a zero Token
// (unproven), and so does an adopted child when the look-ahead cannot see
// the whole queue. A reissue to the same parent within the tick of
// slack cannot be told apart by ticks; the pidfs inode then names the
// newcomer, which a later comparison with a claim's token exposes.
//
// Barrier: the kernel queues a message while the call that caused it runs
// (a fork's before fork returns), so a message caused later is read later.
// Barrier causes one, a rename of the calling thread to a numbered marker
// name (PROC_EVENT_COMM) undone at once, and Read, meeting it, knows every
// message queued before has been handed out: a request acting on the graph
// waits for that (tracker.Sync) instead of for the reader to catch up on
// its own. A marker lost in an overflow is never met; the caller asks for
// another.
//
// An exec needs more: the process may exec, exit and have its pid reissued
// (clone3 set_tid, ns_last_pid) within the tick of slack, and the newcomer,
// a fresh fork showing its parent's arguments, must not get the exec and
// with it the exec context the tracker reads. The kernel sends a process's
// exit before its pid can be reissued, so until then every event is of
// the instance that holds the pid: an exec of a process whose fork the
// source saw (no loss since) keeps its token only when it is the fork's
// (the pidfs inode tells two instances of one tick apart), and none when
// the fork could not be bound; an exec of any other process keeps it only
// when the process started two ticks or more before the exec (a successor
// started after it).
//
// No silent loss, by construction: the kernel numbers the messages it
// sends from each CPU (cn_msg.seq, a per-CPU counter taken with preemption
// off, so one CPU's messages are queued in order), and every listener
// without a filter is sent every number. Read follows each CPU's numbers:
// a message numbered past the next one expected proves that many messages
// were sent but never queued (the kernel failed to allocate or queue them
// without the socket reporting an overflow), and Read delivers an
// events.Lost event with that count before the message, dropping the
// thread counts and exit records the missing messages could have changed.
// (Kernels before about 4.3 could queue one CPU's messages out of order: there a
// message numbered behind is handled as it is, and the gap it left was a
// false alarm.) An overflow (ENOBUFS) is reported as below, and the gap it
// leaves in the numbers is covered by that report. So each exit message
// the kernel sent is read, or is covered by a reported loss; and each exit
// message read becomes an exit event, or is provably not the last of its
// group (coalesced), or is reported as a loss of one event:
//
// Threads: the connector reports every thread's creation and exit. Forks
// with child pid != tgid are not processes. For a process whose fork it saw
// the source counts threads: the kernel sends a thread's creation before
// the thread runs, every creation and exit of the group comes after its
// fork, and a message not read clears the counts, so the count is exact and
// the exit goes out with the message of the last thread: no /proc read, no
// wait.
//
// A process that predates the source (or crossed a loss) is judged from
// /proc when one of its threads exits: the thread group is dead when the
// tgid is gone, is held by a process started after the event's tick
// (reissued), or is a zombie leader with no other thread; it is alive when
// the process at tgid started before the event's tick and has a live
// thread. When /proc cannot tell (a failed read, or a process at tgid
// started within the event's tick, which is a reissue or the same group),
// the message is reported as a Lost event of one, and the consumer
// resyncs: neither a false exit nor a silent miss. A dead group's report
// is held until the socket queue has been drained or a later event (sent
// after the group was seen dead), a fork at the same tgid or a barrier's
// marker sent after the exit arrives, so it
// carries the time and status of the group's last thread exit; exit events
// of the same generation handled later are recognised (no fork of the tgid
// in between) and dropped. The records that recognise stragglers are kept
// for a minute of event time and dropped after a loss, so a straggler
// handled later than that can repeat an exit (a repeat, never a miss).
// Exit tokens are zero (the instance is gone); Time (boot-time ns) lets
// the lineage graph attribute the exit to the right generation.
//
// What numbering cannot see: a message the kernel never numbered (it sends
// none while no listener is counted, which a listener's own LISTEN rules
// out), and the last messages of a CPU that sends nothing more (seen at its
// next message).
//
// Receiving: one raw, non-blocking recvmmsg(2) takes up to 64 datagrams.
// While 16 or more come within 5 ms (whether one receive takes them or each
// wakes Read), Read naps 5 ms between receives instead of being woken by
// the kernel for each message; once a nap finds fewer, it waits in the
// runtime's poller. The socket is in the poller only during that wait: the
// runtime's epoll set is edge-triggered and shared, and the kernel wakes
// whichever runtime thread sleeps in it for every datagram queued, so a
// socket left there would cost a wake-up per message even while Read naps
// (see sock). Close ends either wait at once.
//
// Loss: when the socket buffer overflows, the kernel fails one receive with
// ENOBUFS and then drops every message until the queue is drained. Read
// drains it and then delivers one events.Lost event whose Count is the
// socket's drop counter (SO_MEMINFO) for the episode, and reading goes on;
// a resync started on the Lost event misses nothing after it. The receive
// buffer is raised to 8 MiB (SO_RCVBUFFORCE as root) to make loss rare.
//
// Looking ahead: a consumer that reads /proc for an exec event (the
// tracker's exec context) asks Follows afterwards what the kernel queued of
// the same process behind it: an exec (/proc showed the later program), a
// change of its ids or session, a rename (what /proc showed of those is
// not what they were at the exec). Follows parses the messages received
// and not yet read, then receives what the socket queued since, without
// waiting, into a second batch that Read takes next (an overflow or error
// met there is Read's, as if its own receive had met it). It sees at most
// 64 datagrams past the batch being read; past that, or across a loss, it
// says it could not see. It does not follow the per-CPU numbers: a message
// the kernel numbered but never queued (an allocation failure, which Read
// reports as a loss when it gets there) it takes as not sent. A change the
// kernel does not report (chdir, setgroups or setpgid alone, a cgroup
// move, arguments rewritten in memory) it cannot see.
//
// The proc connector serves only the initial pid and user namespaces; New
// checks both and fails with events.ErrUnavailable elsewhere, as it does
// without CAP_NET_ADMIN or a kernel built without CONFIG_PROC_EVENTS.
package proccon
