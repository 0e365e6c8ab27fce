package events

import (
	"time"
)

// Encoder writes events as AppendJSONTime does, the same bytes, keeping
// from line to line the texts a stream of events repeats: the ids,
// session and terminal of the last contexts written (a storm's processes
// share a user, a session and a group; a parent is named again by each
// child), and the date and time of day of the last second written. An
// Encoder is for one goroutine; its zero value is ready.
type Encoder struct {
	ctxs     [4]ctxMemo
	ctxNext  int
	argvs    [4]argvMemo
	argvNext int
	sec      int64
	secSet   bool
	secText  [len("2006-01-02T15:04:05")]byte
}

// ctxMemo is the text written for a context with the omit bits that
// shaped it. A process's own text ends before its vpid, which the key
// then leaves out (it is 0 there); a parent's holds it.
type ctxMemo struct {
	key  Context
	o    Omit
	set  bool
	text []byte
}

// argvMemo is the text written for the arguments of an image ("argv":
// [...]) and whether they were UTF-8, kept under the image's number
// (ExecInfo.Image) and checked against the vector it was written from.
type argvMemo struct {
	id        uint64
	argv0     *string
	argc      int
	truncated bool
	bad       badText
	text      []byte
}

// parentMemo marks the memo of a parent's context, whose text holds the
// vpid.
const parentMemo Omit = 1 << 7

// AppendJSONTime is AppendJSONTime (the package function) with e's texts.
func (e *Encoder) AppendJSONTime(b []byte, ev *Event, o Omit, wall time.Time) []byte {
	b = e.appendJSON(b, ev, o)
	b = b[:len(b)-1] // reopen the object
	b = append(b, `,"time":"`...)
	b = e.appendTime(b, wall)
	return append(b, '"', '}')
}

// context returns the text kept for c written with o, nil when there is
// none (always for a nil e).
func (e *Encoder) context(c *Context, o Omit) []byte {
	if e == nil {
		return nil
	}
	for i := range e.ctxs {
		if m := &e.ctxs[i]; m.set && m.o == o && (o&parentMemo != 0 && m.key == *c || o&parentMemo == 0 && sameButNSPid(&m.key, c)) {
			return m.text
		}
	}
	return nil
}

// sameButNSPid reports whether c is key (whose NSPid is 0) but for its
// namespace pid.
func sameButNSPid(key, c *Context) bool {
	k := *c
	k.NSPid = 0
	return *key == k
}

// remember keeps text as what c written with o gives, in place of the
// oldest text kept.
func (e *Encoder) remember(c *Context, o Omit, text []byte) {
	if e == nil {
		return
	}
	m := &e.ctxs[e.ctxNext]
	e.ctxNext = (e.ctxNext + 1) % len(e.ctxs)
	m.key, m.o, m.set = *c, o, true
	if o&parentMemo == 0 {
		m.key.NSPid = 0
	}
	m.text = append(m.text[:0], text...)
}

// argv returns the text kept for argv, the arguments of x's image, or
// nil.
func (e *Encoder) argv(argv []string, x *ExecInfo) *argvMemo {
	if e == nil || x.Image == 0 {
		return nil
	}
	for i := range e.argvs {
		if m := &e.argvs[i]; m.id == x.Image && m.argv0 == &argv[0] && m.argc == len(argv) && m.truncated == x.ArgsTruncated {
			return m
		}
	}
	return nil
}

// rememberArgv keeps text as what argv (not empty), the arguments of x's
// image, give, with bad, in place of the oldest text kept.
func (e *Encoder) rememberArgv(argv []string, x *ExecInfo, bad badText, text []byte) {
	if e == nil || x.Image == 0 {
		return
	}
	m := &e.argvs[e.argvNext]
	e.argvNext = (e.argvNext + 1) % len(e.argvs)
	m.id, m.argv0, m.argc, m.truncated, m.bad = x.Image, &argv[0], len(argv), x.ArgsTruncated, bad
	m.text = append(m.text[:0], text...)
}

// appendTime appends t in UTC as time.RFC3339Nano writes it (trailing
// zeros of the fraction dropped, no fraction for a whole second), the
// date and time of day kept for the last second written.
func (e *Encoder) appendTime(b []byte, t time.Time) []byte {
	if e == nil {
		return t.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	sec := t.Unix()
	if !e.secSet || e.sec != sec {
		u := t.UTC()
		if y := u.Year(); y < 0 || y > 9999 {
			return u.AppendFormat(b, time.RFC3339Nano)
		}
		u.AppendFormat(e.secText[:0], "2006-01-02T15:04:05")
		e.sec, e.secSet = sec, true
	}
	b = append(b, e.secText[:]...)
	if ns := t.Nanosecond(); ns != 0 {
		var d [10]byte
		d[0] = '.'
		for i := 9; i > 0; i-- {
			d[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for d[n-1] == '0' {
			n--
		}
		b = append(b, d[:n]...)
	}
	return append(b, 'Z')
}
