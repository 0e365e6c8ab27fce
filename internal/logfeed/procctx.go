package logfeed

import (
	"path"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/userdb"
)

// This file maps the process context an event carries (events.Context,
// events.ExecInfo: captured in the kernel by the eBPF source) onto ECS and
// OCSF. Ids are ECS keywords (strings); what ECS has no field for (the
// audit ids, the cgroup, the pid and mount namespaces, truncation,
// redaction and deletion marks, the fields whose text was not UTF-8) goes
// under supervisor.*.

// commandLine appends argv joined by spaces to b, cut to limit bytes.
func commandLine(b []byte, argv []string, limit int) []byte {
	for i, a := range argv {
		if i > 0 {
			b = append(b, ' ')
		}
		if len(b)+len(a) > limit {
			return append(b, a[:redact.Cut(a, max(0, limit-len(b)))]...)
		}
		b = append(b, a...)
	}
	return b
}

// lineCut reports whether a line holds less of argv than there is:
// command_line, argv joined by spaces (the longer of its two forms), is
// cut at limit, and process.args with it when their bytes alone are over.
func lineCut(argv []string, limit int) bool {
	n := -1 // no space before the first
	for _, a := range argv {
		if n += 1 + len(a); n > limit {
			return true
		}
	}
	return false
}

// argsSize is the argument bytes (NULs included) the process received:
// the mechanism's count when it gave one, else those of argv.
func argsSize(argv []string, x *events.ExecInfo) int {
	if x.ArgsSize > 0 {
		return x.ArgsSize
	}
	n := 0
	for _, a := range argv {
		n += len(a) + 1
	}
	return n
}

// argsCount is how many arguments the process received: the kernel's count
// when the mechanism gave one, else the arguments it delivered.
func argsCount(argv []string, x *events.ExecInfo) int {
	if x.ArgsCount > 0 {
		return x.ArgsCount
	}
	return len(argv)
}

// badText says which texts of a process line hold bytes that are not
// UTF-8: the line has U+FFFD in their place (jsonx, zerolog), which reads
// the same as a real U+FFFD, so the line names those fields (in
// supervisor.invalid_utf8, OCSF unmapped.invalid_utf8). One bit for each
// of the process's name, executable, arguments and working directory, the
// same four of the parent (badParent times each), and the cgroup.
type badText uint16

const (
	badName badText = 1 << iota
	badExe
	badArgs
	badCwd
	badParent = 1 << 4 // badParent*badName is the parent's name
	badCgroup = 1 << 8
	badBits   = 9
)

// badTextFields are the fields of each badText bit, ECS and OCSF.
var (
	badFieldsECS = [badBits][]string{
		{"process.name"}, {"process.executable"}, {"process.args", "process.command_line"}, {"process.working_directory"},
		{"process.parent.name"}, {"process.parent.executable"}, {"process.parent.args", "process.parent.command_line"}, {"process.parent.working_directory"},
		{"supervisor.cgroup"},
	}
	badFieldsOCSF = [badBits][]string{
		{"process.name"}, {"process.file.path", "process.file.name"}, {"process.cmd_line"}, {"process.working_directory"},
		{"process.parent_process.name"}, {"process.parent_process.file.path", "process.parent_process.file.name"},
		{"process.parent_process.cmd_line"}, {"process.parent_process.working_directory"},
		{"unmapped.cgroup"},
	}
)

// badTexts returns the texts of ev's line that are not UTF-8: what the
// line writes of them (the arguments up to limit), a character cut at the
// end of a cut text (the name at 15 bytes by the kernel, the arguments at
// limit) not counted, as the cut is marked.
func badTexts(ev *events.Event, limit int) badText {
	bad := imageBad(&ev.Comm, ev.Exe, ev.Argv, ev.Exec.Cwd, limit)
	if d := ev.Parent; d != nil && (ev.PPid != 0 || !ev.ParentToken.IsZero()) { // written
		bad |= badParent * imageBad(&d.Comm, d.Exe, d.Argv, d.Exec.Cwd, limit)
	}
	if !utf8.ValidString(ev.Exec.Cgroup) {
		bad |= badCgroup
	}
	return bad
}

func imageBad(comm *[16]byte, exe string, argv []string, cwd string, limit int) badText {
	bad := nameBad(comm)
	if !utf8.ValidString(exe) {
		bad |= badExe
	}
	budget := limit
	for _, a := range argv {
		if len(a) > budget {
			if !jsonx.ValidCut(a[:redact.Cut(a, budget)]) {
				bad |= badArgs
			}
			break
		}
		if !utf8.ValidString(a) {
			bad |= badArgs
			break
		}
		budget -= len(a)
	}
	if !utf8.ValidString(cwd) {
		bad |= badCwd
	}
	return bad
}

// nameBad returns badName when the name is not UTF-8. The kernel cuts a
// name at 15 bytes (TASK_COMM_LEN less its NUL): a shorter one was not
// cut.
func nameBad(comm *[16]byte) badText {
	b := commBytes(comm)
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	if i == len(b) {
		return 0 // ASCII, as nearly every name is
	}
	name := unsafe.String(&comm[0], len(b))
	if len(name) < len(comm)-1 && !utf8.ValidString(name) || !jsonx.ValidCut(name) {
		return badName
	}
	return 0
}

// badFieldList adds the fields of bad to s as invalid_utf8.
func badFieldList(s *zerolog.Event, bad badText, fields *[badBits][]string) {
	arr := s.CreateArray()
	for i := range badBits {
		if bad&(1<<i) != 0 {
			for _, f := range fields[i] {
				arr.Str(f)
			}
		}
	}
	s.Array("invalid_utf8", arr)
}

// supervisorContext adds to supervisor.* what ECS has no field for; fields
// names the fields of a badText, in the line's schema; limit is the line's
// argument bytes (Config.ArgsBytes).
func supervisorContext(s *zerolog.Event, ev *events.Event, fields *[badBits][]string, limit int) {
	x := &ev.Ctx
	if x.Valid {
		if x.Audit && x.LoginUID != events.UnsetID {
			s.Uint32("audit_login_uid", x.LoginUID)
		}
		if x.Audit && x.AuditSession != events.UnsetID {
			s.Uint32("audit_session_id", x.AuditSession)
		}
		if x.NGroups > events.MaxGroups {
			s.Int("supplemental_groups_count", x.NGroups)
		}
		if x.Has(events.CtxCgroup) {
			s.Uint64("cgroup_id", x.CgroupID)
		}
		s.Uint32("pid_ns", x.PidNS).Uint32("mnt_ns", x.MntNS)
		absentList(s, x)
	}
	if d := ev.Parent; d != nil && (marked(d.Argv, &d.Exec, limit) || d.Ctx.Valid && d.Ctx.Absent != 0) {
		p := execMarks(s.CreateDict(), d.Argv, &d.Exec, limit)
		absentList(p, &d.Ctx)
		s.Dict("parent", p)
	}
	if bad := badTexts(ev, limit); bad != 0 {
		badFieldList(s, bad, fields)
	}
	// An exec's, or an inferred fork's that /proc described (the
	// others have no exec context: every part is zero, nothing shows).
	if ev.Exec.Cgroup != "" {
		s.Str("cgroup", ev.Exec.Cgroup)
	}
	execMarks(s, ev.Argv, &ev.Exec, limit)
	if ev.Exec.CgroupTruncated {
		s.Bool("cgroup_truncated", true)
	}
}

// marked reports whether argv and x have a mark execMarks writes.
func marked(argv []string, x *events.ExecInfo, limit int) bool {
	return x.ArgsTruncated || x.ArgsWithheld || x.ArgsRedacted || x.ExeTruncated || x.ExeDeleted || x.CwdTruncated || x.CwdDeleted || lineCut(argv, limit)
}

// absentList adds context_absent, the parts of x left out, when x has
// some.
func absentList(s *zerolog.Event, x *events.Context) {
	if !x.Valid || x.Absent == 0 {
		return
	}
	var b [32]byte
	s.RawJSON("context_absent", events.AppendAbsentNames(b[:0], x.Absent))
}

// execMarks adds to s the marks of arguments and paths that are not what
// the process has: cut, by the mechanism's bound or the line's (with the
// real size), redacted, and of paths whose name was unlinked (deleted:
// another file may have that name now).
func execMarks(s *zerolog.Event, argv []string, x *events.ExecInfo, limit int) *zerolog.Event {
	if x.ArgsWithheld {
		s.Bool("args_withheld", true)
	}
	if x.ArgsTruncated || lineCut(argv, limit) {
		s.Bool("args_truncated", true).Int("args_size", argsSize(argv, x))
	}
	if x.ArgsRedacted {
		s.Bool("args_redacted", true)
	}
	if x.ExeTruncated {
		s.Bool("executable_truncated", true)
	}
	if x.ExeDeleted {
		s.Bool("executable_deleted", true)
	}
	if x.CwdTruncated {
		s.Bool("working_directory_truncated", true)
	}
	if x.CwdDeleted {
		s.Bool("working_directory_deleted", true)
	}
	return s
}

// ocsfContext adds the context to the OCSF process object p: the user (the
// effective uid and the supplementary groups; OCSF's User has one uid, so
// the real and saved ids go to unmapped), the session (its id, the
// leader's token as uid_alt, the terminal), the container, the working
// directory and the namespace pid.
func ocsfContext(p *zerolog.Event, xi *events.ExecInfo, x *events.Context, names *userdb.DB) {
	if xi.Cwd != "" {
		p.Str("working_directory", xi.Cwd)
	}
	if xi.ContainerID != "" {
		p.Dict("container", p.CreateDict().Str("uid", xi.ContainerID))
	}
	if !x.Valid {
		return
	}
	var num [12]byte
	if x.Has(events.CtxIDs) {
		ocsfUser(p, x, names)
	}
	if x.SID > 0 && x.Has(events.CtxSession) {
		var b [80]byte
		s := p.CreateDict().Bytes("uid", strconv.AppendInt(num[:0], int64(x.SID), 10))
		if !x.SessionLeader.IsZero() {
			s.Bytes("uid_alt", x.SessionLeader.Append(b[:0]))
		}
		if x.TTY {
			s.Bytes("terminal", appendTTY(b[:0], x.TTYMajor, x.TTYMinor))
		}
		p.Dict("session", s)
	}
	if x.NSPid > 0 {
		p.Int32("namespace_pid", x.NSPid)
	}
}

// ocsfUser adds the user object: the effective uid and the supplementary
// groups of x.
func ocsfUser(p *zerolog.Event, x *events.Context, names *userdb.DB) {
	var num [12]byte
	u := p.CreateDict().Bytes("uid", strconv.AppendUint(num[:0], uint64(x.EUID), 10)).Int("type_id", 0).Str("type", "Unknown")
	if names != nil {
		if n, ok := names.User(x.EUID); ok {
			u.Str("name", n)
		}
	}
	if n := min(x.NGroups, events.MaxGroups); n > 0 {
		arr := p.CreateArray()
		for _, g := range x.Groups[:n] {
			d := p.CreateDict().Bytes("uid", strconv.AppendUint(num[:0], uint64(g), 10))
			if names != nil {
				if n, ok := names.Group(g); ok {
					d.Str("name", n)
				}
			}
			arr.Dict(d)
		}
		u.Array("groups", arr)
	}
	p.Dict("user", u)
}

// ocsfUnmapped adds to unmapped.* what the OCSF process object has no
// attribute for; limit is the line's argument bytes.
func ocsfUnmapped(u *zerolog.Event, ev *events.Event, limit int) {
	x := &ev.Ctx
	if x.Has(events.CtxIDs) {
		var num [12]byte
		u.Bytes("real_uid", strconv.AppendUint(num[:0], uint64(x.UID), 10)).
			Bytes("saved_uid", strconv.AppendUint(num[:0], uint64(x.SUID), 10)).
			Bytes("gid", strconv.AppendUint(num[:0], uint64(x.EGID), 10)).
			Bytes("real_gid", strconv.AppendUint(num[:0], uint64(x.GID), 10)).
			Bytes("saved_gid", strconv.AppendUint(num[:0], uint64(x.SGID), 10))
	}
	if x.Has(events.CtxSession) {
		u.Int32("pgid", x.PGID)
		if x.PGID > 0 && !x.GroupLeader.IsZero() {
			var b [80]byte
			u.Bytes("group_leader_uid", x.GroupLeader.Append(b[:0]))
		}
	}
	supervisorContext(u, ev, &badFieldsOCSF, limit)
}

// appendTTY appends the name of a terminal device to b as ps(1) names the
// usual majors, "major:minor" otherwise.
func appendTTY(b []byte, major, minor uint32) []byte {
	switch major {
	case 136, 137, 138, 139, 140, 141, 142, 143:
		return strconv.AppendUint(append(b, "pts/"...), uint64((major-136)*256+minor), 10)
	case 4:
		if minor < 64 {
			return strconv.AppendUint(append(b, "tty"...), uint64(minor), 10)
		}
		return strconv.AppendUint(append(b, "ttyS"...), uint64(minor-64), 10)
	}
	return strconv.AppendUint(append(strconv.AppendUint(b, uint64(major), 10), ':'), uint64(minor), 10)
}

// exeFile is the OCSF file object of an executable path.
func exeFile(p *zerolog.Event, exe string) *zerolog.Event {
	return p.CreateDict().Str("path", exe).Str("name", path.Base(exe)).Int("type_id", 1).Str("type", "Regular File")
}
