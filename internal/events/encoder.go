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
// [...]) and whether they were UTF-8, kept under their ArgsKey.
type argvMemo struct {
	key  ArgsKey
	bad  badText
	text []byte
}

// ArgsKey names the arguments of a numbered image (ExecInfo.Image) as an
// encoder was given them: the number, the vector's address and length,
// and the count and cut the text depends on. Two equal keys are the same
// arguments; the zero key (an image without a number, no arguments)
// names none, so that an encoder keeps no text for it. A consumer that
// withheld or rewrote the arguments of a numbered image gives another
// vector, and so another key.
type ArgsKey struct {
	image     uint64
	argv0     *string
	argc      int
	count     int
	truncated bool
}

// KeyOf returns the ArgsKey of argv, the arguments of x's image.
func KeyOf(argv []string, x *ExecInfo) ArgsKey {
	if x.Image == 0 || len(argv) == 0 {
		return ArgsKey{}
	}
	return ArgsKey{image: x.Image, argv0: &argv[0], argc: len(argv), count: x.ArgsCount, truncated: x.ArgsTruncated}
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

// ctxKey is c as a memo written with o is kept under: a process's own
// text leaves out its vpid, a parent's holds it.
func ctxKey(c *Context, o Omit) Context {
	k := *c
	if o&parentMemo == 0 {
		k.NSPid = 0
	}
	return k
}

// context returns the text kept for key written with o, nil when there
// is none (always for a nil e).
func (e *Encoder) context(key *Context, o Omit) []byte {
	if e == nil {
		return nil
	}
	for i := range e.ctxs {
		if m := &e.ctxs[i]; m.set && m.o == o && m.key == *key {
			return m.text
		}
	}
	return nil
}

// remember keeps text as what key written with o gives, in place of the
// oldest text kept.
func (e *Encoder) remember(key *Context, o Omit, text []byte) {
	if e == nil {
		return
	}
	m := &e.ctxs[e.ctxNext]
	e.ctxNext = (e.ctxNext + 1) % len(e.ctxs)
	m.key, m.o, m.set = *key, o, true
	m.text = append(m.text[:0], text...)
}

// argv returns the text kept for the arguments key names, or nil.
func (e *Encoder) argv(key ArgsKey) *argvMemo {
	if e == nil || key == (ArgsKey{}) {
		return nil
	}
	for i := range e.argvs {
		if m := &e.argvs[i]; m.key == key {
			return m
		}
	}
	return nil
}

// rememberArgv keeps text, with bad, as what the arguments key names
// give, in place of the oldest text kept.
func (e *Encoder) rememberArgv(key ArgsKey, bad badText, text []byte) {
	if e == nil || key == (ArgsKey{}) {
		return
	}
	m := &e.argvs[e.argvNext]
	e.argvNext = (e.argvNext + 1) % len(e.argvs)
	m.key, m.bad = key, bad
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
