package events

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/token"
)

// AppendJSON appends ev as one JSON object, without a newline, and returns
// the extended buffer. The keys are kind and mechanism, then count for a
// Lost event; otherwise pid, ppid, token and parent_token (null when zero),
// comm, exit_code and signal for an Exit, tid, exe and argv for an Exec
// where known, then what the exec captured (args_count, working_directory,
// cgroup, container.id, truncation and deletion marks) and, when the event
// carries a context, the ids with their ECS names (user.id, real_user.id, ...,
// session_leader, group_leader, tty, interactive, vpid) and pid_ns,
// mnt_ns, cgroup_id and audit; then, when the consumer's exec cache saw the
// parent's exec (Event.Parent), parent: the fields ECS defines under
// process.parent, with the same keys (see appendParentJSON); inferred
// when set.
// args_redacted marks arguments a redaction pattern rewrote. A byte that is
// not part of valid UTF-8 is written as U+FFFD (as the log feed writes it),
// so the object is always valid JSON, and invalid_utf8 lists the keys of
// the texts that held such bytes (comm, exe, argv, working_directory,
// cgroup, and the parent's as parent.comm, ...), so such a name never reads
// as another, valid one: as the log feed marks them. A character cut at
// the end of a cut text (the kernel's 15-byte name, a vector cut at its
// bound) is the cut's, and not listed. AppendJSON does not allocate when b
// has room.
func AppendJSON(b []byte, ev *Event) []byte { return AppendJSONOmit(b, ev, 0) }

// Omit has a bit for each field AppendJSONOmit leaves out: the key is then
// absent, not written with a false or zero value that would read as a real
// one (whoever leaves a field out says so to the reader).
type Omit uint8

const (
	OmitInteractive       Omit = 1 << iota // interactive
	OmitPidNS                              // pid_ns
	OmitMntNS                              // mnt_ns
	OmitParentToken                        // parent_token
	OmitSessionLeaderID                    // session_leader.entity_id
	OmitGroupLeaderID                      // group_leader.entity_id
	OmitParentInteractive                  // parent.interactive
)

// AppendJSONTime is AppendJSONOmit with the event's wall time (see
// internal/boottime) as "time", RFC 3339 in UTC with nanoseconds, after
// the event's own fields: the time the daemon's stream and `events --json`
// give every line.
func AppendJSONTime(b []byte, ev *Event, o Omit, wall time.Time) []byte {
	return (*Encoder)(nil).AppendJSONTime(b, ev, o, wall)
}

// AppendJSONOmit is AppendJSON leaving out the fields of o. It does not
// allocate when b has room.
func AppendJSONOmit(b []byte, ev *Event, o Omit) []byte {
	return (*Encoder)(nil).appendJSON(b, ev, o)
}

// appendJSON is AppendJSONOmit, with the texts e keeps (none when e is
// nil).
func (e *Encoder) appendJSON(b []byte, ev *Event, o Omit) []byte {
	b = append(b, `{"kind":"`...)
	b = append(b, ev.Kind.String()...)
	b = append(b, `","mechanism":"`...)
	b = append(b, ev.Mechanism...)
	b = append(b, '"')
	if ev.Kind == Lost {
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, ev.Count, 10)
		return append(b, '}')
	}
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(ev.Pid), 10)
	b = append(b, `,"ppid":`...)
	b = strconv.AppendInt(b, int64(ev.PPid), 10)
	b = append(b, `,"token":`...)
	b = appendTokenJSON(b, ev.Token)
	if o&OmitParentToken == 0 {
		b = append(b, `,"parent_token":`...)
		b = appendTokenJSON(b, ev.ParentToken)
	}
	b = append(b, `,"comm":`...)
	var bad badText
	b, bad = appendCommJSON(b, &ev.Comm)
	if ev.Kind == Exit {
		b = append(b, `,"exit_code":`...)
		if code, ok := ev.Exited(); ok {
			b = strconv.AppendInt(b, int64(code), 10)
		} else {
			b = append(b, "null"...)
		}
		if sig, ok := ev.Signaled(); ok {
			b = append(b, `,"signal":`...)
			b = strconv.AppendInt(b, int64(sig), 10)
		}
	}
	if ev.Kind == Exec && ev.Tid != 0 && ev.Tid != ev.Pid {
		b = append(b, `,"tid":`...)
		b = strconv.AppendInt(b, int64(ev.Tid), 10)
	}
	// An exec's image, the one the exec cache lent a fork or an exit, what
	// a poller read of a process it found: whatever of them is known.
	b, img := e.appendImageJSON(b, ev.Exe, ev.Argv, &ev.Exec)
	bad |= img
	if ev.Ctx.Valid {
		b = e.appendContextJSON(b, &ev.Ctx, o)
	}
	if ev.Parent != nil {
		var pb badText
		b, pb = e.appendParentJSON(b, ev.Parent, o)
		bad |= pb << parentShift
	}
	if ev.Inferred {
		b = append(b, `,"inferred":true`...)
	}
	if bad != 0 {
		b = appendBadJSON(b, bad)
	}
	return append(b, '}')
}

// badText has a bit for each text of an object that held bytes that are
// not UTF-8 (each written as U+FFFD): its own, then, shifted by
// parentShift, the parent's.
type badText uint16

const (
	badComm badText = 1 << iota
	badExe
	badArgv
	badCwd
	badCgroup
	parentShift = iota
)

// badKeys names the texts of badText's bits, the parent's after the
// process's own, as invalid_utf8 lists them.
var badKeys = [...]string{
	"comm", "exe", "argv", "working_directory", "cgroup",
	"parent.comm", "parent.exe", "parent.argv", "parent.working_directory", "parent.cgroup",
}

// appendBadJSON appends "invalid_utf8", the keys of bad's texts.
func appendBadJSON(b []byte, bad badText) []byte {
	b = append(b, `,"invalid_utf8":[`...)
	first := true
	for i, k := range badKeys {
		if bad&(1<<i) == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"')
	}
	return append(b, ']')
}

// appendCommJSON appends the process name, and badComm when it is not
// UTF-8. The kernel cuts a name at 15 bytes (TASK_COMM_LEN less its NUL):
// a character cut there is the cut's, not a byte that is not UTF-8.
func appendCommJSON(b []byte, comm *[16]byte) ([]byte, badText) {
	name := comm[:clen(comm[:])]
	b, ok := appendJSONStringOK(b, name)
	if ok || len(name) == len(comm)-1 && jsonx.ValidCut(string(name)) {
		return b, 0
	}
	return b, badComm
}

// appendImageJSON appends exe and argv where known, then what the exec
// captured beside them, and returns which texts were not UTF-8 (the last
// argument of a vector cut at a bound may end in a cut character).
func (e *Encoder) appendImageJSON(b []byte, exe string, argv []string, x *ExecInfo) ([]byte, badText) {
	var bad badText
	if exe != "" {
		var ok bool
		b = append(b, `,"exe":`...)
		if b, ok = appendJSONStringOK(b, []byte(exe)); !ok {
			bad |= badExe
		}
	}
	if len(argv) > 0 {
		key := KeyOf(argv, x)
		if m := e.argv(key); m != nil {
			b = append(b, m.text...)
			bad |= m.bad
		} else {
			from := len(b)
			var argvBad badText
			b = append(b, `,"argv":[`...)
			for i, a := range argv {
				if i > 0 {
					b = append(b, ',')
				}
				var ok bool
				if b, ok = appendJSONStringOK(b, []byte(a)); !ok && (i < len(argv)-1 || !x.ArgsTruncated || !jsonx.ValidCut(a)) {
					argvBad = badArgv
				}
			}
			b = append(b, ']')
			e.rememberArgv(key, argvBad, b[from:])
			bad |= argvBad
		}
	}
	b, xb := appendExecJSON(b, x)
	return b, bad | xb
}

// appendExecJSON appends what an exec captured beside exe and argv, with
// the names ECS gives them under process (args_count, working_directory),
// container.id, and the cgroup path and truncation and deletion marks; it
// returns which of its texts were not UTF-8.
func appendExecJSON(b []byte, x *ExecInfo) ([]byte, badText) {
	var bad badText
	var ok bool
	if x.ArgsCount > 0 {
		b = append(b, `,"args_count":`...)
		b = strconv.AppendInt(b, int64(x.ArgsCount), 10)
	}
	if x.ArgsTruncated {
		b = append(b, `,"args_truncated":true,"args_size":`...)
		b = strconv.AppendInt(b, int64(x.ArgsSize), 10)
	}
	if x.ArgsRedacted {
		b = append(b, `,"args_redacted":true`...)
	}
	if x.ExeTruncated {
		b = append(b, `,"exe_truncated":true`...)
	}
	if x.ExeDeleted {
		b = append(b, `,"exe_deleted":true`...)
	}
	if x.Cwd != "" {
		b = append(b, `,"working_directory":`...)
		if b, ok = appendJSONStringOK(b, []byte(x.Cwd)); !ok {
			bad |= badCwd
		}
		if x.CwdTruncated {
			b = append(b, `,"working_directory_truncated":true`...)
		}
		if x.CwdDeleted {
			b = append(b, `,"working_directory_deleted":true`...)
		}
	}
	if x.Cgroup != "" {
		b = append(b, `,"cgroup":`...)
		if b, ok = appendJSONStringOK(b, []byte(x.Cgroup)); !ok {
			bad |= badCgroup
		}
		if x.CgroupTruncated {
			b = append(b, `,"cgroup_truncated":true`...)
		}
	}
	if x.ContainerID != "" {
		b = append(b, `,"container":{"id":`...)
		b = appendJSONString(b, []byte(x.ContainerID))
		if x.ContainerRuntime != "" {
			b = append(b, `,"runtime":`...)
			b = appendJSONString(b, []byte(x.ContainerRuntime))
		}
		b = append(b, '}')
	}
	return b, bad
}

// appendParentJSON appends the parent's description as "parent": the
// fields ECS defines under process.parent, with the keys of the event's
// own (comm, exe, argv, args_count, working_directory, the marks, user,
// real_user and group ids, group_leader, interactive, vpid); its pid and
// token are the event's ppid and parent_token. It leaves out interactive
// when o has OmitParentInteractive, and returns which texts were not UTF-8.
func (e *Encoder) appendParentJSON(b []byte, p *Desc, o Omit) ([]byte, badText) {
	b = append(b, `,"parent":{"comm":`...)
	b, bad := appendCommJSON(b, &p.Comm)
	x := p.Exec
	x.Cgroup, x.ContainerID, x.ContainerRuntime = "", "", "" // the parent's cgroup is not asked for
	b, img := e.appendImageJSON(b, p.Exe, p.Argv, &x)
	bad |= img
	if c := &p.Ctx; c.Valid {
		k := o&OmitParentInteractive | parentMemo
		key := ctxKey(c, k)
		if text := e.context(&key, k); text != nil {
			return append(append(b, text...), '}'), bad
		}
		from := len(b)
		b = appendParentContextJSON(b, c, o)
		e.remember(&key, k, b[from:])
	}
	return append(b, '}'), bad
}

// appendParentContextJSON appends what appendParentJSON writes of the
// parent's context c (valid).
func appendParentContextJSON(b []byte, c *Context, o Omit) []byte {
	if c.Has(CtxIDs) {
		b = append(b, `,"user":{"id":"`...)
		b = strconv.AppendUint(b, uint64(c.EUID), 10)
		b = append(b, `"},"real_user":{"id":"`...)
		b = strconv.AppendUint(b, uint64(c.UID), 10)
		b = append(b, `"},"group":{"id":"`...)
		b = strconv.AppendUint(b, uint64(c.EGID), 10)
		b = append(b, `"}`...)
	}
	if c.Has(CtxSession) {
		b = appendLeaderJSON(b, "group_leader", c.PGID, c.GroupLeader, true)
		if o&OmitParentInteractive == 0 {
			b = append(b, `,"interactive":`...)
			b = strconv.AppendBool(b, c.Interactive())
		}
	}
	b = append(b, `,"vpid":`...)
	b = strconv.AppendInt(b, int64(c.NSPid), 10)
	return appendAbsentJSON(b, c.Absent)
}

// appendAbsentJSON appends "context_absent":["ids",...], the parts of a
// context that are not known, when there are any.
func appendAbsentJSON(b []byte, a CtxPart) []byte {
	if a == 0 {
		return b
	}
	return AppendAbsentNames(append(b, `,"context_absent":`...), a)
}

// AppendAbsentNames appends the names of the parts in a as a JSON array
// (["ids","session"]): what every encoder writes as context_absent.
func AppendAbsentNames(b []byte, a CtxPart) []byte {
	b = append(b, '[')
	first := true
	for _, p := range ctxParts {
		if a&p.Part != 0 {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, '"')
			b = append(b, p.Name...)
			b = append(b, '"')
		}
	}
	return append(b, ']')
}

// appendLeaderJSON appends "key":{"pid":pid,"entity_id":t}, without
// entity_id unless withID.
func appendLeaderJSON(b []byte, key string, pid int32, t token.Token, withID bool) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":{"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if withID {
		b = append(b, `,"entity_id":`...)
		b = appendTokenJSON(b, t)
	}
	return append(b, '}')
}

// appendContextJSON appends the ids of c with the names ECS gives them
// under process (ids as strings, as ECS keywords are), and the audit ids,
// cgroup id and pid and mount namespaces, which ECS has no names for; it
// leaves out what o has of interactive, pid_ns, mnt_ns and the leaders'
// entity_id.
func (e *Encoder) appendContextJSON(b []byte, c *Context, o Omit) []byte {
	const ownOmit = OmitSessionLeaderID | OmitGroupLeaderID | OmitInteractive
	key := ctxKey(c, o&ownOmit)
	if text := e.context(&key, o&ownOmit); text != nil {
		b = append(b, text...)
	} else {
		from := len(b)
		b = appendIDsJSON(b, c, o)
		e.remember(&key, o&ownOmit, b[from:])
	}
	b = append(b, `,"vpid":`...)
	b = strconv.AppendInt(b, int64(c.NSPid), 10)
	if o&OmitPidNS == 0 {
		b = append(b, `,"pid_ns":`...)
		b = strconv.AppendUint(b, uint64(c.PidNS), 10)
	}
	if o&OmitMntNS == 0 {
		b = append(b, `,"mnt_ns":`...)
		b = strconv.AppendUint(b, uint64(c.MntNS), 10)
	}
	if c.Has(CtxCgroup) {
		b = append(b, `,"cgroup_id":`...)
		b = strconv.AppendUint(b, c.CgroupID, 10)
	}
	if c.Audit {
		b = append(b, `,"audit":{"login_uid":`...)
		b = strconv.AppendUint(b, uint64(c.LoginUID), 10)
		b = append(b, `,"session_id":`...)
		b = strconv.AppendUint(b, uint64(c.AuditSession), 10)
		b = append(b, '}')
	}
	return b
}

// appendIDsJSON appends what appendContextJSON writes of c before the
// vpid: the ids, the session, the terminal and the parts absent.
func appendIDsJSON(b []byte, c *Context, o Omit) []byte {
	id := func(b []byte, key string, v uint32) []byte {
		b = append(b, `,"`...)
		b = append(b, key...)
		b = append(b, `":{"id":"`...)
		b = strconv.AppendUint(b, uint64(v), 10)
		return append(b, `"}`...)
	}
	if c.Has(CtxIDs) {
		b = id(b, "user", c.EUID)
		b = id(b, "real_user", c.UID)
		b = id(b, "saved_user", c.SUID)
		b = id(b, "group", c.EGID)
		b = id(b, "real_group", c.GID)
		b = id(b, "saved_group", c.SGID)
		b = append(b, `,"supplemental_groups":[`...)
		for i, g := range c.Groups[:min(c.NGroups, MaxGroups)] {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":"`...)
			b = strconv.AppendUint(b, uint64(g), 10)
			b = append(b, `"}`...)
		}
		b = append(b, ']')
		if c.NGroups > MaxGroups {
			b = append(b, `,"supplemental_groups_count":`...)
			b = strconv.AppendInt(b, int64(c.NGroups), 10)
		}
	}
	if c.Has(CtxSession) {
		b = appendLeaderJSON(b, "session_leader", c.SID, c.SessionLeader, o&OmitSessionLeaderID == 0)
		b = appendLeaderJSON(b, "group_leader", c.PGID, c.GroupLeader, o&OmitGroupLeaderID == 0)
		if c.TTY {
			b = append(b, `,"tty":{"char_device":{"major":`...)
			b = strconv.AppendUint(b, uint64(c.TTYMajor), 10)
			b = append(b, `,"minor":`...)
			b = strconv.AppendUint(b, uint64(c.TTYMinor), 10)
			b = append(b, `}}`...)
		}
		if o&OmitInteractive == 0 {
			b = append(b, `,"interactive":`...)
			b = strconv.AppendBool(b, c.Interactive())
		}
	}
	return appendAbsentJSON(b, c.Absent)
}

// appendTokenJSON appends t as a JSON string, or null when t is zero.
func appendTokenJSON(b []byte, t token.Token) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.Append(b)
	return append(b, '"')
}

// clen returns the length of the NUL-terminated string in b.
func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// appendJSONString appends s as a JSON string. Quotes, backslashes and
// control characters are escaped, and so are the C1 controls (U+0080 to
// U+009F), U+2028 and U+2029, as internal/jsonx escapes them; each byte
// that is not part of valid UTF-8 is written as \ufffd, the replacement
// character, so the result is always valid JSON. Not as \u00XX: that is
// the character U+00XX, so a name with the byte 0xff would decode as one
// with ÿ, another valid name.
func appendJSONString(b, s []byte) []byte {
	b, _ = appendJSONStringOK(b, s)
	return b
}

// appendJSONStringOK is appendJSONString, and reports whether s was UTF-8
// (false when a byte was written as \ufffd).
func appendJSONStringOK(b, s []byte) ([]byte, bool) {
	valid := true
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		if n := jsonx.PlainPrefix(s[i:]); n > 0 {
			b = append(b, s[i:i+n]...)
			i += n
			if i == len(s) {
				break
			}
		}
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		case c < 0x80:
			b = append(b, c)
		default:
			r, n := decodeRune(s[i:])
			if r < 0 {
				b = append(b, `\ufffd`...)
				valid = false
				i++
				continue
			}
			if jsonx.Escaped(r) {
				// A C1 control, U+2028, U+2029 or a bidi control:
				// valid JSON raw, but a reader splitting at Unicode
				// line breaks would cut the line there, and a
				// terminal show it reversed (see internal/jsonx).
				b = append(b, '\\', 'u', hex[r>>12], hex[r>>8&15], hex[r>>4&15], hex[r&15])
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"'), valid
}

// decodeRune returns the rune at the start of b and its length, or -1 and 1
// when b does not start with valid UTF-8.
func decodeRune(b []byte) (rune, int) {
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n <= 1 {
		return -1, 1
	}
	return r, n
}
