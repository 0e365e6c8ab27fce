package logfeed

import (
	"strconv"

	"github.com/rs/zerolog"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/userdb"
)

// The zerolog encoder of process events that ecsevent.go replaced, kept
// as the reference TestProcessLineEncoders compares it with.

func (x *ecs) refEvent(c *capture, ev *events.Event) {
	var types []string
	switch ev.Kind {
	case events.Exit:
		types = typeEnd
	default:
		// Exec starts a new program: ECS (and Elastic's own endpoint
		// data) file it as a process start.
		types = typeStart
	}
	t := x.h.clock.At(ev.Time)
	now := t
	e := x.begin(c, t)
	eventObject(e, c.action, types, "", "")

	var tok [80]byte
	var ts [40]byte
	p := e.CreateDict().Int32("pid", ev.Pid)
	if !ev.Token.IsZero() {
		p.Bytes("entity_id", ev.Token.Append(tok[:0]))
		if st, ok := startTime(&x.h.clock, now, ev.Token); ok {
			p.RawJSON("start", appendTime(ts[:0], st))
		}
	}
	if name := commBytes(&ev.Comm); len(name) > 0 {
		p.Bytes("name", name)
	}
	if ev.Exe != "" {
		p.Str("executable", ev.Exe)
	}
	c.ecsExec(e, p, ev, x.h.argsMax)
	ecsContext(p, &ev.Ctx, x.h.names, false)
	if ev.Tid != 0 && ev.Tid != ev.Pid {
		p.Dict("thread", p.CreateDict().Int32("id", ev.Tid))
	}
	var sig int
	if ev.Kind == events.Exit {
		if code, ok := ev.Exited(); ok {
			p.Int("exit_code", code)
		} else if s, ok := ev.Signaled(); ok {
			sig = s
		}
		p.RawJSON("end", appendTime(ts[:0], t))
	}
	if ev.PPid != 0 || !ev.ParentToken.IsZero() {
		pp := p.CreateDict().Int32("pid", ev.PPid)
		if !ev.ParentToken.IsZero() {
			pp.Bytes("entity_id", ev.ParentToken.Append(tok[:0]))
			if st, ok := startTime(&x.h.clock, now, ev.ParentToken); ok {
				pp.RawJSON("start", appendTime(ts[:0], st))
			}
		}
		if ev.Parent != nil {
			c.ecsParent(pp, ev.Parent, x.h.names, x.h.argsMax)
		}
		p.Dict("parent", pp)
	}
	e.Dict("process", p)

	s := e.CreateDict().Str("mechanism", string(ev.Mechanism))
	if ev.Inferred {
		s.Bool("inferred", true)
	}
	if sig != 0 {
		s.Str("exit_signal", signalName(sig))
	}
	supervisorContext(s, ev, &badFieldsECS, x.h.argsMax)
	e.Dict("supervisor", s)
	e.Send()
}

// argsArray fills arr with argv, cut to limit bytes in total.
func argsArray(arr *zerolog.Array, argv []string, limit int) *zerolog.Array {
	budget := limit
	for _, a := range argv {
		if len(a) > budget {
			arr.Str(a[:budget])
			break
		}
		arr.Str(a)
		budget -= len(a)
	}
	return arr
}

// idDict is {"id":"<n>","name":"<name>"}, the ECS user and group objects;
// the name comes from lookup and is left out when it has none.
func idDict(p *zerolog.Event, id uint32, lookup func(uint32) (string, bool)) *zerolog.Event {
	var num [12]byte
	d := p.CreateDict().Bytes("id", strconv.AppendUint(num[:0], uint64(id), 10))
	if lookup != nil {
		if n, ok := lookup(id); ok {
			d.Str("name", n)
		}
	}
	return d
}

// leaderDict is {"pid":n,"entity_id":token} for a session or group leader.
func leaderDict(p *zerolog.Event, pid int32, tok token.Token) *zerolog.Event {
	var b [80]byte
	d := p.CreateDict().Int32("pid", pid)
	if !tok.IsZero() {
		d.Bytes("entity_id", tok.Append(b[:0]))
	}
	return d
}

// ecsExec adds what an exec captured to the ECS process object p, and the
// line's container object to e.
func (c *capture) ecsExec(e, p *zerolog.Event, ev *events.Event, limit int) {
	c.ecsImage(p, ev.Argv, &ev.Exec, limit)
	if x := &ev.Exec; x.ContainerID != "" {
		d := e.CreateDict().Str("id", x.ContainerID)
		if x.ContainerRuntime != "" {
			d.Str("runtime", x.ContainerRuntime)
		}
		e.Dict("container", d)
	}
}

// ecsImage adds the arguments and the working directory to the ECS
// process object p.
func (c *capture) ecsImage(p *zerolog.Event, argv []string, x *events.ExecInfo, limit int) {
	if len(argv) > 0 || x.ArgsCount > 0 {
		p.Array("args", argsArray(p.CreateArray(), argv, limit)).Int("args_count", argsCount(argv, x))
		c.scratch = commandLine(c.scratch[:0], argv, limit)
		p.Bytes("command_line", c.scratch)
	}
	if x.Cwd != "" {
		p.Str("working_directory", x.Cwd)
	}
}

// ecsParent adds the parent's description (from the exec cache) to the
// ECS object process.parent pp: what ECS defines there, which is the
// process's own fields but the session leader.
func (c *capture) ecsParent(pp *zerolog.Event, d *events.Desc, names *userdb.DB, limit int) {
	if name := commBytes(&d.Comm); len(name) > 0 {
		pp.Bytes("name", name)
	}
	if d.Exe != "" {
		pp.Str("executable", d.Exe)
	}
	c.ecsImage(pp, d.Argv, &d.Exec, limit)
	ecsContext(pp, &d.Ctx, names, true)
}

// ecsContext adds the ids of events.Context to the ECS process object p,
// with the names names gives them (none when names is nil); the session
// leader only when p is not a parent (ECS has no process.parent.session_leader).
func ecsContext(p *zerolog.Event, x *events.Context, names *userdb.DB, parent bool) {
	if !x.Valid {
		return
	}
	var user, group func(uint32) (string, bool)
	if names != nil {
		user, group = names.User, names.Group
	}
	p.Dict("user", idDict(p, x.EUID, user)).
		Dict("real_user", idDict(p, x.UID, user)).
		Dict("saved_user", idDict(p, x.SUID, user)).
		Dict("group", idDict(p, x.EGID, group)).
		Dict("real_group", idDict(p, x.GID, group)).
		Dict("saved_group", idDict(p, x.SGID, group))
	if n := min(x.NGroups, events.MaxGroups); n > 0 {
		arr := p.CreateArray()
		for _, g := range x.Groups[:n] {
			arr.Dict(idDict(p, g, group))
		}
		p.Array("supplemental_groups", arr)
	}
	if x.SID > 0 && !parent {
		p.Dict("session_leader", leaderDict(p, x.SID, x.SessionLeader))
	}
	if x.PGID > 0 {
		p.Dict("group_leader", leaderDict(p, x.PGID, x.GroupLeader))
	}
	if x.TTY {
		p.Dict("tty", p.CreateDict().Dict("char_device", p.CreateDict().
			Uint32("major", x.TTYMajor).Uint32("minor", x.TTYMinor)))
	}
	p.Bool("interactive", x.Interactive())
	if x.NSPid > 0 {
		p.Int32("vpid", x.NSPid)
	}
}
