package proccon

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
