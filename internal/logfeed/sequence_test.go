package logfeed

import (
	"bytes"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// mutate changes one part of ev, chosen by op, to a value chosen by v:
// the parts the one-pass encoder keeps text of between lines (instances,
// contexts, names, leaders, parents) and the parts it writes each time.
func mutate(ev *events.Event, op, v byte) {
	ids := []uint32{0, 27, 1000, 1001, 65534, 0xffffffff}
	id := ids[int(v)%len(ids)]
	tok := func(t *token.Token) {
		switch v % 4 {
		case 0:
			*t = token.Token{}
		case 1:
			t.Start += uint64(v)
		case 2:
			t.Ino += uint64(v)
		case 3:
			t.Prec = token.Micro
			t.Start = 1_700_000_000_000_000 + uint64(v)
		}
	}
	c := &ev.Ctx
	switch op % 24 {
	case 0:
		ev.Pid += int32(v%3) - 1
	case 1:
		tok(&ev.Token)
	case 2:
		tok(&ev.ParentToken)
	case 3:
		c.UID = id
	case 4:
		c.EUID = id
	case 5:
		c.SUID = id
	case 6:
		c.GID, c.EGID = id, id
	case 7:
		c.SGID = id
	case 8:
		c.NGroups = int(v) % (events.MaxGroups + 2)
		for i := range min(c.NGroups, events.MaxGroups) {
			c.Groups[i] = ids[(int(v)+i)%len(ids)]
		}
	case 9:
		c.TTY, c.StdTTY = v&1 != 0, v&2 != 0
		c.TTYMajor, c.TTYMinor = 136, uint32(v%4)
	case 10:
		c.Audit, c.LoginUID, c.AuditSession = v&1 != 0, id, uint32(v)
	case 11:
		c.SID, c.PGID = int32(v), int32(v/2)
	case 12:
		tok(&c.SessionLeader)
	case 13:
		tok(&c.GroupLeader)
	case 14:
		c.NSPid, c.PidNS, c.MntNS = int32(v), 4026531836+uint32(v%2), 4026531840+uint32(v%3)
	case 15:
		c.CgroupID = uint64(v)
		ev.Exec.Cgroup = []string{"", "/", "/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope"}[v%3]
	case 16:
		c.Valid = v&1 != 0
	case 17:
		ev.Kind = []events.Kind{events.Fork, events.Exec, events.Exit}[v%3]
		ev.Status = uint32(v)
	case 18:
		if v%3 == 0 {
			ev.Parent = nil
		} else {
			d := events.Desc{Exe: "/bin/p" + string(rune('a'+v%5)), Argv: []string{"p", string(rune('a' + v%7))}, Ctx: *c}
			d.Ctx.EUID = id
			copy(d.Comm[:], d.Exe[5:])
			ev.Parent = &d
		}
	case 19:
		ev.Argv = []string{"x", string(rune('a' + v%9))}
		ev.Exec.ArgsCount = len(ev.Argv) + int(v%2)
		ev.Exec.ArgsTruncated = v&4 != 0
	case 20:
		ev.Exe = "/usr/bin/" + string(rune('a'+v%4))
		ev.Exec.ExeTruncated = v&8 != 0
		ev.Exec.ExeDeleted = v&16 != 0
	case 21:
		ev.Exec.Cwd = "/home/" + string(rune('a'+v%4))
		ev.Exec.CwdDeleted = v&4 != 0
	case 22:
		ev.Time += uint64(v) * 1_000_000_007
	case 23:
		ev.Comm = [16]byte{}
		copy(ev.Comm[:], []string{"bash", "python3", "", "a\"b"}[v%4])
	}
}

// FuzzProcLineSequence: one procLine writes a sequence of process lines,
// each event a change of the one before in any part; every line is the
// zerolog encoder's, which keeps nothing between lines. Text the one-pass
// encoder kept of an earlier instance, context, name or parent never shows
// in a later line it no longer describes.
func FuzzProcLineSequence(f *testing.F) {
	// A parent described with the child's ids: its kept context text
	// must not be the child's, which has the session leader.
	f.Add([]byte{18, 50})
	f.Add([]byte{3, 1, 4, 2, 3, 1, 8, 5, 8, 0, 12, 1, 12, 1, 18, 1, 18, 0, 0, 2})
	f.Add([]byte{1, 1, 1, 2, 9, 3, 9, 0, 10, 1, 10, 2, 17, 0, 17, 2, 16, 0, 16, 1, 22, 9})
	f.Add([]byte{15, 2, 15, 0, 14, 3, 14, 4, 19, 5, 20, 9, 21, 1, 23, 3, 13, 3, 2, 3})
	enc := encoders(f)
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		ev := richExec()
		for i := 0; i+1 < len(ops); i += 2 {
			mutate(&ev, ops[i], ops[i+1])
			action := map[events.Kind]string{events.Fork: ActionProcessStarted, events.Exec: ActionProcessExec, events.Exit: ActionProcessEnded}[ev.Kind]
			e := ev
			got, want := enc(action, &e)
			if !bytes.Equal(got, want) {
				t.Fatalf("after %d changes (last %d=%d), the line differs from zerolog's:\n got %s\nwant %s", i/2+1, ops[i]%24, ops[i+1], got, want)
			}
		}
	})
}
