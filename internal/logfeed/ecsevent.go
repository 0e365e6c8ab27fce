package logfeed

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/userdb"
)

// This file is the ECS encoder of process events, the feed's hot line: a
// fork, an exec and an exit for every process the host starts. It writes
// the line in one pass into the capture's reused buffer (no zerolog
// sub-objects copied into their parents), with what repeats rendered once:
// the part from "ecs" to "event" per action, the names of users and
// groups from one userdb.Names per line, the command line copied from the
// arguments already escaped, and, kept from line to line, the text of the
// last few process instances (pid, entity_id, start) and contexts (users,
// groups, leaders, terminal): under a storm one parent's children repeat
// the parent, its leaders and their ids in every line. The line is, byte for byte, the one the
// zerolog encoder wrote before it (TestProcessLineEncoders,
// FuzzProcessLine).

// procPrefix returns `,"ecs":...,"event":{...}` for a process event of
// action, rendered once per Logger.
func (x *ecs) procPrefix(action string) []byte {
	switch action {
	case ActionProcessStarted:
		return x.prefixFork
	case ActionProcessExec:
		return x.prefixExec
	}
	return x.prefixExit
}

func (x *ecs) renderPrefixes() {
	render := func(action, typ string) []byte {
		b := append([]byte(`,"ecs":`), x.ecsJSON...)
		b = append(append(b, `,"host":`...), x.hostJSON...)
		b = append(append(b, `,"service":`...), x.svcJSON...)
		b = append(b, `,"event":{"kind":"event","category":["process"],"type":["`...)
		b = append(append(b, typ...), `"],"action":`...)
		b = jsonx.AppendString(b, action)
		return append(b, `,"module":"supervisor"}`...)
	}
	// Exec starts a new program: ECS (and Elastic's own endpoint data)
	// file it as a process start.
	x.prefixFork = render(ActionProcessStarted, "start")
	x.prefixExec = render(ActionProcessExec, "start")
	x.prefixExit = render(ActionProcessEnded, "end")
}

// procLine is the state of one process line being written, and what it
// keeps from line to line of the same capture.
type procLine struct {
	b       []byte
	names   userdb.Names
	argsMax int      // the line's argument bytes (Config.ArgsBytes, or cut)
	cut     int      // the line's own bound, for a user over its share (0: none)
	bad     badText  // the texts written that are not UTF-8 (program)
	spans   [][2]int // where the arguments just written in args are, escaped

	// The name of the last user and group id named in this line.
	user, group lastName
	// "2006-01-02T15:04:05" of the last two seconds written, by second.
	secs    [2]int64
	secText [2][19]byte
	secSet  [2]bool
	secNext int
	// The text of the last instances and contexts written (see instance
	// and context), replaced round robin.
	insts    [4]instText
	instNext int
	ctxs     [2]ctxText
	ctxNext  int
	// The text of the arguments of the last images written (see image),
	// replaced round robin: a storm writes its parent's image on every
	// line, and a process's own on its fork or exec and again on its
	// exit.
	imgs    [4]imgText
	imgNext int
}

// imgText is what image wrote of an image's arguments (from ,"args": to
// the end of command_line) and which of them were not UTF-8, kept under
// their events.ArgsKey and the line's argument bytes.
type imgText struct {
	key     events.ArgsKey
	argsMax int
	bad     badText
	text    []byte
}

// instText is the text instance wrote for a pid and token, with the boot
// clock offset its start time was converted with.
type instText struct {
	pid  int32
	tok  token.Token
	off  int64
	set  bool
	text []byte
}

// ctxText is the text context wrote for a context (its NSPid left out: the
// vpid is written after it) with the names of one userdb.Names.
type ctxText struct {
	key    events.Context
	parent bool
	gen    uint64
	set    bool
	text   []byte
}

// remember copies w.b[from:] into *dst, reusing its array.
func (w *procLine) remember(dst *[]byte, from int) {
	*dst = append((*dst)[:0], w.b[from:]...)
}

// key starts a member: k is its comma, quoted name and colon, as in
// `,"name":` (every k of the methods below is that form, written out so
// that a member starts with one copy).
func (w *procLine) key(k string) { w.b = append(w.b, k...) }

func (w *procLine) str(k, v string) {
	w.key(k)
	w.b = jsonx.AppendString(w.b, v)
}

func (w *procLine) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *procLine) uint(k string, v uint64) {
	w.key(k)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *procLine) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

// tok writes a token: its text needs no escaping (token.Append, which
// keeps the boot id's hex from token to token).
func (w *procLine) tok(k string, t token.Token) {
	w.key(k)
	w.b = append(w.b, '"')
	w.b = t.Append(w.b)
	w.b = append(w.b, '"')
}

// time writes t as appendTime does, with the date and time of day of the
// last two seconds written kept.
func (w *procLine) time(k string, t time.Time) {
	w.key(k)
	w.b = w.appendTime(w.b, t)
}

func (w *procLine) appendTime(b []byte, t time.Time) []byte {
	sec := t.Unix()
	i := 0
	if !w.secSet[0] || w.secs[0] != sec {
		i = 1
	}
	if !w.secSet[i] || w.secs[i] != sec {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return appendTime(b, t)
		}
		i = w.secNext
		w.secNext ^= 1
		var full [32]byte
		copy(w.secText[i][:], appendRFC3339Micro(full[:0], t))
		w.secs[i], w.secSet[i] = sec, true
	}
	b = append(b, '"')
	b = append(b, w.secText[i][:]...)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z', '"')
}

// event writes the ECS line of a fork, exec or exit into w.b.
func (x *ecs) procEvent(w *procLine, action string, ev *events.Event) {
	// The event's own time is the line's now: no clock read for a
	// stream of stamped events (boottime.Clock.At).
	t := x.h.clock.At(ev.Time)
	now := t
	w.names, w.argsMax = x.h.names.At(now), x.h.argsMax
	if w.cut > 0 {
		w.argsMax = w.cut
	}
	w.user, w.group = lastName{}, lastName{}
	w.b = append(w.b, `{"@timestamp":`...)
	w.b = w.appendTime(w.b, t)
	w.b = append(w.b, x.procPrefix(action)...)
	if ev.Exec.ContainerID != "" {
		w.container(&ev.Exec)
	}

	w.b = append(w.b, `,"process":{"pid":`...)
	x.instance(w, now, ev.Pid, ev.Token)
	w.bad = w.program(&ev.Comm, ev.Exe, ev.Argv, &ev.Exec)
	w.context(&ev.Ctx, false)
	if ev.Tid != 0 && ev.Tid != ev.Pid {
		w.b = append(w.b, `,"thread":{"id":`...)
		w.b = strconv.AppendInt(w.b, int64(ev.Tid), 10)
		w.b = append(w.b, '}')
	}
	var sig int
	if ev.Kind == events.Exit {
		if code, ok := ev.Exited(); ok {
			w.int(`,"exit_code":`, int64(code))
		} else if s, ok := ev.Signaled(); ok {
			sig = s
		}
		w.time(`,"end":`, t)
	}
	if ev.PPid != 0 || !ev.ParentToken.IsZero() {
		w.b = append(w.b, `,"parent":{"pid":`...)
		x.instance(w, now, ev.PPid, ev.ParentToken)
		if d := ev.Parent; d != nil {
			w.bad |= badParent * w.program(&d.Comm, d.Exe, d.Argv, &d.Exec)
			w.context(&d.Ctx, true)
		}
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, '}')

	w.b = append(w.b, `,"supervisor":{"mechanism":`...)
	w.b = jsonx.AppendString(w.b, string(ev.Mechanism))
	if ev.Inferred {
		w.bool(`,"inferred":`, true)
	}
	if sig != 0 {
		w.str(`,"exit_signal":`, signalName(sig))
	}
	w.supervisor(ev)
	w.b = append(w.b, '}', '}', '\n')
}

// container writes container.*: the id the event carries and the runtime
// whose layout named it (the mechanism derived both from the cgroup path).
func (w *procLine) container(x *events.ExecInfo) {
	w.b = append(w.b, `,"container":{"id":`...)
	w.b = jsonx.AppendString(w.b, x.ContainerID)
	if x.ContainerRuntime != "" {
		w.str(`,"runtime":`, x.ContainerRuntime)
	}
	w.b = append(w.b, '}')
}

// instance writes the pid (its key already written), and the token with
// the start time it says: the text kept for the pid and token when the
// boot clock offset is still the one it was converted with.
func (x *ecs) instance(w *procLine, now time.Time, pid int32, tok token.Token) {
	var off int64
	if tok.Prec == token.Ticks {
		off = x.h.clock.Offset(now)
	}
	for i := range w.insts {
		if c := &w.insts[i]; c.set && c.pid == pid && c.tok == tok && c.off == off {
			w.b = append(w.b, c.text...)
			return
		}
	}
	from := len(w.b)
	w.b = strconv.AppendInt(w.b, int64(pid), 10)
	if !tok.IsZero() {
		w.tok(`,"entity_id":`, tok)
		if st, ok := startTime(&x.h.clock, now, tok); ok {
			w.time(`,"start":`, st)
		}
	}
	c := &w.insts[w.instNext]
	w.instNext = (w.instNext + 1) % len(w.insts)
	c.pid, c.tok, c.off, c.set = pid, tok, off, true
	w.remember(&c.text, from)
}

// program writes the name, the executable, the arguments and the working
// directory, and returns which of them are not UTF-8 (as imageBad, the
// arguments seen as they are escaped).
func (w *procLine) program(comm *[16]byte, exe string, argv []string, x *events.ExecInfo) badText {
	bad := nameBad(comm)
	if name := commBytes(comm); len(name) > 0 {
		w.key(`,"name":`)
		w.b = jsonx.AppendBytes(w.b, name)
	}
	if exe != "" && !w.text(`,"executable":`, exe) {
		bad |= badExe
	}
	return bad | w.image(argv, x)
}

// text writes k: v as str does, and reports whether v is UTF-8.
func (w *procLine) text(k, v string) bool {
	w.key(k)
	w.b = append(w.b, '"')
	var ok bool
	w.b, ok = jsonx.AppendEscapedUTF8(w.b, v)
	w.b = append(w.b, '"')
	return ok
}

// image writes the arguments and the working directory: process.args cut
// to w.argsMax bytes in total, args_count, and command_line, the arguments
// joined by spaces and cut to w.argsMax, copied from their escaped form
// in args where whole. It returns badArgs and badCwd as imageBad does.
func (w *procLine) image(argv []string, x *events.ExecInfo) (bad badText) {
	key := events.KeyOf(argv, x)
	if m := w.findImage(key); m != nil {
		w.b = append(w.b, m.text...)
		bad = m.bad
	} else if len(argv) > 0 || x.ArgsCount > 0 {
		from := len(w.b)
		bad = w.args(argv, x)
		if key != (events.ArgsKey{}) {
			m := &w.imgs[w.imgNext]
			w.imgNext = (w.imgNext + 1) % len(w.imgs)
			m.key, m.argsMax, m.bad = key, w.argsMax, bad
			w.remember(&m.text, from)
		}
	}
	if x.Cwd != "" && !w.text(`,"working_directory":`, x.Cwd) {
		bad |= badCwd
	}
	return bad
}

// findImage returns the text kept for the arguments key names, or nil.
func (w *procLine) findImage(key events.ArgsKey) *imgText {
	if key == (events.ArgsKey{}) {
		return nil
	}
	for i := range w.imgs {
		if m := &w.imgs[i]; m.key == key && m.argsMax == w.argsMax {
			return m
		}
	}
	return nil
}

// args writes the arguments as image does, and returns badArgs when they
// were not UTF-8.
func (w *procLine) args(argv []string, x *events.ExecInfo) (bad badText) {
	w.key(`,"args":`)
	// b and spans are local while the arguments are written: one
	// store of each into w at the end, not one per argument.
	b, spans := append(w.b, '['), w.spans[:0]
	budget := w.argsMax
	for i, a := range argv {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		if len(a) > budget {
			cut := a[:redact.Cut(a, budget)]
			b = jsonx.AppendEscaped(b, cut)
			b = append(b, '"')
			if !jsonx.ValidCut(cut) {
				bad |= badArgs
			}
			break
		}
		start := len(b)
		var ok bool
		if b, ok = jsonx.AppendEscapedUTF8(b, a); !ok {
			bad |= badArgs
		}
		spans = append(spans, [2]int{start, len(b)})
		b = append(b, '"')
		budget -= len(a)
	}
	b = append(b, `],"args_count":`...)
	b = strconv.AppendInt(b, int64(argsCount(argv, x)), 10)
	b = append(b, `,"command_line":"`...)
	n := 0 // raw bytes of the command line so far
	for i, a := range argv {
		if i > 0 {
			b = append(b, ' ')
			n++
		}
		if n+len(a) > w.argsMax {
			b = jsonx.AppendEscaped(b, a[:redact.Cut(a, max(0, w.argsMax-n))])
			break
		}
		if i < len(spans) {
			// Whole in args: copy it, escaped.
			b = append(b, b[spans[i][0]:spans[i][1]]...)
		} else {
			b = jsonx.AppendEscaped(b, a)
		}
		n += len(a)
	}
	w.b, w.spans = append(b, '"'), spans
	return bad
}

// context writes the ids of events.Context with their names; the session
// leader only when not for the parent (ECS has no
// process.parent.session_leader).
func (w *procLine) context(x *events.Context, parent bool) {
	if !x.Valid {
		return
	}
	key := *x
	key.NSPid = 0
	gen := w.names.Gen()
	if c := w.findContext(&key, parent, gen); c != nil {
		w.b = append(w.b, c.text...)
	} else {
		from := len(w.b)
		w.ids(x, parent)
		c := &w.ctxs[w.ctxNext]
		w.ctxNext = (w.ctxNext + 1) % len(w.ctxs)
		c.key, c.parent, c.gen, c.set = key, parent, gen, true
		w.remember(&c.text, from)
	}
	if x.NSPid > 0 {
		w.int(`,"vpid":`, int64(x.NSPid))
	}
}

// findContext returns the text kept for key, or nil. A Names of Gen 0 (no
// user database) names nothing, so its text is the same for any.
func (w *procLine) findContext(key *events.Context, parent bool, gen uint64) *ctxText {
	for i := range w.ctxs {
		if c := &w.ctxs[i]; c.set && c.parent == parent && c.gen == gen && c.key == *key {
			return c
		}
	}
	return nil
}

// ids writes what context writes before the vpid: of the parts x has.
func (w *procLine) ids(x *events.Context, parent bool) {
	if x.Has(events.CtxIDs) {
		w.userIDs(x)
	}
	if !x.Has(events.CtxSession) {
		return
	}
	if x.SID > 0 && !parent {
		w.leader(`,"session_leader":`, x.SID, x.SessionLeader)
	}
	if x.PGID > 0 {
		w.leader(`,"group_leader":`, x.PGID, x.GroupLeader)
	}
	if x.TTY {
		w.b = append(w.b, `,"tty":{"char_device":{"major":`...)
		w.b = strconv.AppendUint(w.b, uint64(x.TTYMajor), 10)
		w.uint(`,"minor":`, uint64(x.TTYMinor))
		w.b = append(w.b, '}', '}')
	}
	w.bool(`,"interactive":`, x.Interactive())
}

// userIDs writes the user and group ids of x.
func (w *procLine) userIDs(x *events.Context) {
	w.id(`,"user":`, x.EUID, &w.user, w.names.User)
	w.id(`,"real_user":`, x.UID, &w.user, w.names.User)
	w.id(`,"saved_user":`, x.SUID, &w.user, w.names.User)
	w.id(`,"group":`, x.EGID, &w.group, w.names.Group)
	w.id(`,"real_group":`, x.GID, &w.group, w.names.Group)
	w.id(`,"saved_group":`, x.SGID, &w.group, w.names.Group)
	if n := min(x.NGroups, events.MaxGroups); n > 0 {
		w.key(`,"supplemental_groups":`)
		w.b = append(w.b, '[')
		for i, g := range x.Groups[:n] {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.idObject(g, &w.group, w.names.Group)
		}
		w.b = append(w.b, ']')
	}
}

// lastName is the last id a line named, and its name: the ids of one line
// are mostly the same few (a uid, its real and saved copies, the parent's).
type lastName struct {
	id    uint32
	name  string
	found bool // the id has a name
	set   bool // id and name hold a lookup
}

// id writes k: {"id":"<n>","name":"<name>"}, the ECS user and group
// objects; the name is left out when lookup has none.
func (w *procLine) id(k string, id uint32, last *lastName, lookup func(uint32) (string, bool)) {
	w.key(k)
	w.idObject(id, last, lookup)
}

func (w *procLine) idObject(id uint32, last *lastName, lookup func(uint32) (string, bool)) {
	w.b = append(w.b, `{"id":"`...)
	w.b = strconv.AppendUint(w.b, uint64(id), 10)
	w.b = append(w.b, '"')
	if !last.set || last.id != id {
		last.name, last.found = lookup(id)
		last.id, last.set = id, true
	}
	if last.found {
		w.str(`,"name":`, last.name)
	}
	w.b = append(w.b, '}')
}

// leader writes k: {"pid":n,"entity_id":token}.
func (w *procLine) leader(k string, pid int32, tok token.Token) {
	w.key(k)
	w.b = append(w.b, `{"pid":`...)
	w.b = strconv.AppendInt(w.b, int64(pid), 10)
	if !tok.IsZero() {
		w.tok(`,"entity_id":`, tok)
	}
	w.b = append(w.b, '}')
}

// supervisor writes into supervisor.* what ECS has no field for, as
// supervisorContext does for the zerolog encoders.
func (w *procLine) supervisor(ev *events.Event) {
	x := &ev.Ctx
	if x.Valid {
		if x.Audit && x.LoginUID != events.UnsetID {
			w.uint(`,"audit_login_uid":`, uint64(x.LoginUID))
		}
		if x.Audit && x.AuditSession != events.UnsetID {
			w.uint(`,"audit_session_id":`, uint64(x.AuditSession))
		}
		if x.NGroups > events.MaxGroups {
			w.int(`,"supplemental_groups_count":`, int64(x.NGroups))
		}
		if x.Has(events.CtxCgroup) {
			w.uint(`,"cgroup_id":`, x.CgroupID)
		}
		w.uint(`,"pid_ns":`, uint64(x.PidNS))
		w.uint(`,"mnt_ns":`, uint64(x.MntNS))
		w.absent(x)
	}
	if d := ev.Parent; d != nil && (marked(d.Argv, &d.Exec, w.argsMax) || d.Ctx.Valid && d.Ctx.Absent != 0) {
		w.key(`,"parent":`)
		w.b = append(w.b, '{')
		n := len(w.b)
		w.marks(d.Argv, &d.Exec)
		w.absent(&d.Ctx)
		if len(w.b) > n && w.b[n] == ',' { // the first member has no comma
			w.b = append(w.b[:n], w.b[n+1:]...)
		}
		w.b = append(w.b, '}')
	}
	bad := w.bad
	if !utf8.ValidString(ev.Exec.Cgroup) {
		bad |= badCgroup
	}
	if bad != 0 {
		w.invalid(bad)
	}
	// An exec's, or an inferred fork's that /proc described (the
	// others have no exec context: every part is zero, nothing shows).
	if ev.Exec.Cgroup != "" {
		w.str(`,"cgroup":`, ev.Exec.Cgroup)
	}
	w.marks(ev.Argv, &ev.Exec)
	if ev.Exec.CgroupTruncated {
		w.bool(`,"cgroup_truncated":`, true)
	}
}

// invalid writes the fields of bad as supervisor.invalid_utf8.
func (w *procLine) invalid(bad badText) {
	w.key(`,"invalid_utf8":`)
	w.b = append(w.b, '[')
	n := len(w.b)
	for i := range badBits {
		if bad&(1<<i) != 0 {
			for _, f := range badFieldsECS[i] {
				if len(w.b) > n {
					w.b = append(w.b, ',')
				}
				w.b = jsonx.AppendString(w.b, f)
			}
		}
	}
	w.b = append(w.b, ']')
}

// absent writes context_absent, the parts of x left out, when x has
// some.
func (w *procLine) absent(x *events.Context) {
	if !x.Valid || x.Absent == 0 {
		return
	}
	w.key(`,"context_absent":`)
	w.b = events.AppendAbsentNames(w.b, x.Absent)
}

// marks writes the marks of arguments and paths that are not what the
// process has: cut, by the mechanism's bound or the line's (with the real
// size), redacted, and of paths whose name was unlinked (deleted).
func (w *procLine) marks(argv []string, x *events.ExecInfo) {
	if x.ArgsWithheld {
		w.bool(`,"args_withheld":`, true)
	}
	if x.ArgsTruncated || lineCut(argv, w.argsMax) {
		w.bool(`,"args_truncated":`, true)
		w.int(`,"args_size":`, int64(argsSize(argv, x)))
	}
	if x.ArgsRedacted {
		w.bool(`,"args_redacted":`, true)
	}
	if x.ExeTruncated {
		w.bool(`,"executable_truncated":`, true)
	}
	if x.ExeDeleted {
		w.bool(`,"executable_deleted":`, true)
	}
	if x.CwdTruncated {
		w.bool(`,"working_directory_truncated":`, true)
	}
	if x.CwdDeleted {
		w.bool(`,"working_directory_deleted":`, true)
	}
}
