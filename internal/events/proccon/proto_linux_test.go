package proccon

import "testing"

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

// TestExecIn: execIn finds an exec of the process among a datagram's
// messages, not a thread's exec counted under another process, a fork or
// exit of it, or anything after a malformed message.
func TestExecIn(t *testing.T) {
	b := appendEvent(nil, ptr(fork(1, 10, 20, 20)), 0)
	b = appendEvent(b, ptr(execEv(2, 31, 30)), 0)
	b = appendEvent(b, ptr(execEv(3, 20, 20)), 0)
	for _, tt := range []struct {
		name string
		b    []byte
		tgid int32
		want bool
	}{
		{"the exec of 20, after a fork of it", b, 20, true},
		{"a thread's exec in process 30", b, 30, true},
		{"the thread's pid is not a process", b, 31, false},
		{"the fork's parent", b, 10, false},
		{"none", nil, 20, false},
		{"cut short", b[:len(b)-3], 20, false},
		{"after a malformed header", append([]byte{1, 0, 0, 0}, b...), 20, false},
	} {
		if got := execIn(tt.b, tt.tgid); got != tt.want {
			t.Errorf("%s: execIn(%d) = %v, want %v", tt.name, tt.tgid, got, tt.want)
		}
	}
}
