package proccon

import (
	"encoding/binary"
	"errors"
)

// Wire constants of the proc connector (linux/connector.h, linux/cn_proc.h,
// linux/netlink.h). Everything on a netlink socket is in host byte order.
const (
	cnIdxProc = 1 // CN_IDX_PROC: connector index and multicast group
	cnValProc = 1 // CN_VAL_PROC

	mcastListen = 1 // PROC_CN_MCAST_LISTEN
	mcastIgnore = 2 // PROC_CN_MCAST_IGNORE

	nlmsgDone = 3 // NLMSG_DONE: the connector sends every message with this type

	nlHdrLen    = 16 // struct nlmsghdr
	cnMsgLen    = 20 // struct cn_msg without data
	evHeaderLen = 16 // what, cpu, timestamp_ns of struct proc_event

	// procEventLen is sizeof(struct proc_event): the 16-byte header and a
	// 24-byte union. A datagram holding one event is 16+20+40 = 76 bytes.
	procEventLen = evHeaderLen + 24
	msgLen       = nlHdrLen + cnMsgLen + procEventLen
)

// proc_event.what values the source acts on. Read skips the others
// without counting them as errors; Follows looks for uid, gid, sid and comm
// changes (each starts with process_pid and process_tgid, as exec does).
// ptrace and coredump are not used.
const (
	whatNone uint32 = 0x00000000 // PROC_EVENT_NONE: an ack of a LISTEN/IGNORE
	whatFork uint32 = 0x00000001
	whatExec uint32 = 0x00000002
	whatUID  uint32 = 0x00000004
	whatGID  uint32 = 0x00000040
	whatSID  uint32 = 0x00000080
	whatComm uint32 = 0x00000200
	whatExit uint32 = 0x80000000
)

// Decode errors. They are counted in Stats.DecodeErrors; Read never returns
// them.
var (
	errShort     = errors.New("message shorter than its headers")
	errLength    = errors.New("length field out of bounds")
	errType      = errors.New("netlink message type is not NLMSG_DONE")
	errNotKernel = errors.New("message not sent by the kernel")
	errNotProc   = errors.New("connector id is not CN_IDX_PROC/CN_VAL_PROC")
	errPayload   = errors.New("event payload too short for its kind")
)

// rawEvent is one proc_event as the kernel sent it, with the connector
// header fields the source needs. data holds the event_data union as six
// 32-bit words (only the words the kind defines are meaningful).
type rawEvent struct {
	seq, ack uint32 // cn_msg seq and ack: an ack echoes the request's seq, ack+1
	what     uint32
	cpu      uint32
	ts       uint64 // CLOCK_MONOTONIC nanoseconds when the kernel sent it
	data     [6]uint32
}

// Words of rawEvent.data per kind (struct fork/exec/exit_proc_event, ack).
const (
	forkParentPid, forkParentTgid, forkChildPid, forkChildTgid   = 0, 1, 2, 3
	execPid, execTgid                                            = 0, 1
	exitPid, exitTgid, exitCode, exitSignal, exitPPid, exitPTgid = 0, 1, 2, 3, 4, 5
	ackErr                                                       = 0
)

// minData is the least event_data the source needs for each kind it acts on.
// Exit's parent fields (words 4 and 5) came later and are optional.
func minData(what uint32) int {
	switch what {
	case whatFork:
		return 16
	case whatExec:
		return 8
	case whatExit:
		return 16
	case whatNone:
		return 4
	}
	return 0
}

var ne = binary.NativeEndian

// parseMessage decodes the netlink message at the start of b into ev and
// returns the length to skip to the next message (the aligned nlmsg_len), or
// an error when the message is malformed or not the proc connector's. After
// an error other than errNotKernel/errNotProc/errPayload the rest of the
// datagram cannot be trusted and the returned length is len(b).
func parseMessage(b []byte, ev *rawEvent) (int, error) {
	if len(b) < nlHdrLen {
		return len(b), errShort
	}
	n := int(ne.Uint32(b[0:4]))
	if n < nlHdrLen || n > len(b) {
		return len(b), errLength
	}
	next := (n + 3) &^ 3
	if next > len(b) {
		next = len(b)
	}
	if ne.Uint16(b[4:6]) != nlmsgDone {
		return next, errType
	}
	if ne.Uint32(b[12:16]) != 0 {
		// nlmsg_pid: the connector puts port id 0 in every message it
		// sends; a user-space sender's header carries its own port.
		return next, errNotKernel
	}
	p := b[nlHdrLen:n]
	if len(p) < cnMsgLen {
		return next, errShort
	}
	if ne.Uint32(p[0:4]) != cnIdxProc || ne.Uint32(p[4:8]) != cnValProc {
		return next, errNotProc
	}
	dl := int(ne.Uint16(p[16:18]))
	if dl > len(p)-cnMsgLen {
		return next, errLength
	}
	d := p[cnMsgLen : cnMsgLen+dl]
	if len(d) < evHeaderLen {
		return next, errShort
	}
	*ev = rawEvent{
		seq:  ne.Uint32(p[8:12]),
		ack:  ne.Uint32(p[12:16]),
		what: ne.Uint32(d[0:4]),
		cpu:  ne.Uint32(d[4:8]),
		ts:   ne.Uint64(d[8:16]),
	}
	u := d[evHeaderLen:]
	if len(u) < minData(ev.what) {
		return next, errPayload
	}
	for i := range ev.data {
		if len(u) < 4*(i+1) {
			break
		}
		ev.data[i] = ne.Uint32(u[4*i:])
	}
	return next, nil
}

// appendControl appends a PROC_CN_MCAST_LISTEN or _IGNORE request (cn_msg
// and the 4-byte op, without the netlink header) to b.
func appendControl(b []byte, op, seq, ack uint32) []byte {
	b = ne.AppendUint32(b, cnIdxProc)
	b = ne.AppendUint32(b, cnValProc)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, ack)
	b = ne.AppendUint16(b, 4) // len
	b = ne.AppendUint16(b, 0) // flags
	return ne.AppendUint32(b, op)
}
