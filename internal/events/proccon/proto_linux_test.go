package proccon

import (
	"slices"
	"testing"
)

// appendEvent appends one complete netlink message carrying ev, as the
// kernel sends it, with nlmsg_pid portID.
func appendEvent(b []byte, ev *rawEvent, portID uint32) []byte {
	b = ne.AppendUint32(b, msgLen)
	b = ne.AppendUint16(b, nlmsgDone)
	b = ne.AppendUint16(b, 0)
	b = ne.AppendUint32(b, ev.seq)
	b = ne.AppendUint32(b, portID)
	b = ne.AppendUint32(b, cnIdxProc)
	b = ne.AppendUint32(b, cnValProc)
	b = ne.AppendUint32(b, ev.seq)
	b = ne.AppendUint32(b, ev.ack)
	b = ne.AppendUint16(b, procEventLen)
	b = ne.AppendUint16(b, 0)
	b = ne.AppendUint32(b, ev.what)
	b = ne.AppendUint32(b, ev.cpu)
	b = ne.AppendUint64(b, ev.ts)
	for _, w := range ev.data {
		b = ne.AppendUint32(b, w)
	}
	return b
}

// change builds a uid, gid, sid or comm change of thread pid in tgid.
func change(what uint32, pid, tgid int32) rawEvent {
	return numbered(rawEvent{what: what, ts: 4, data: [6]uint32{uint32(pid), uint32(tgid)}})
}

// TestFollowsIn: followsIn finds an exec of the process among a datagram's
// messages, not a thread's exec counted under another process, a fork or
// exit of it, or anything after a malformed message; a change of any
// thread's ids or of the session; a rename of the main thread only.
func TestFollowsIn(t *testing.T) {
	b := appendEvent(nil, ptr(exitEv(1, 41, 40, 0, 1)), 0)
	b = appendEvent(b, ptr(fork(1, 10, 20, 20)), 0)
	b = appendEvent(b, ptr(execEv(2, 31, 30)), 0)
	b = appendEvent(b, ptr(execEv(3, 20, 20)), 0)
	ids := appendEvent(nil, ptr(change(whatUID, 51, 50)), 0)
	ids = appendEvent(ids, ptr(change(whatGID, 60, 60)), 0)
	ids = appendEvent(ids, ptr(change(whatSID, 70, 70)), 0)
	ids = appendEvent(ids, ptr(change(whatComm, 81, 80)), 0)
	ids = appendEvent(ids, ptr(change(whatComm, 90, 90)), 0)
	for _, tt := range []struct {
		name string
		b    []byte
		tgid int32
		want Follow
	}{
		{"the exec of 20, after a fork of it", b, 20, FollowExec},
		{"a thread's exec in process 30", b, 30, FollowExec},
		{"the thread's pid is not a process", b, 31, 0},
		{"the fork's parent", b, 10, 0},
		{"an exit", b, 40, FollowExit},
		{"none", nil, 20, 0},
		{"cut short", b[:len(b)-3], 20, 0},
		{"after a malformed header", append([]byte{1, 0, 0, 0}, b...), 20, 0},
		{"a thread's uid", ids, 50, FollowIDs},
		{"gid", ids, 60, FollowIDs},
		{"setsid", ids, 70, FollowSession},
		{"a thread renamed", ids, 80, 0},
		{"the main thread renamed", ids, 90, FollowComm},
		{"both", append(slices.Clone(b), ids...), 20, FollowExec},
	} {
		if got := followsIn(tt.b, tt.tgid); got != tt.want {
			t.Errorf("%s: followsIn(%d) = %v, want %v", tt.name, tt.tgid, got, tt.want)
		}
	}
}
