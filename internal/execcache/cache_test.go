package execcache

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

func tok(start, ino uint64) token.Token {
	return token.Token{Start: start, Ino: ino, Prec: token.Ticks}
}

func execEv(pid int32, t token.Token, ppid int32, pt token.Token, argv ...string) events.Event {
	ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: pid, Token: t, PPid: ppid, ParentToken: pt,
		Exe: "/bin/" + argv[0], Argv: argv, Exec: events.ExecInfo{Cwd: "/w", ArgsCount: len(argv)}}
	copy(ev.Comm[:], argv[0])
	ev.Ctx = events.Context{Valid: true, UID: 1000, EUID: 1000, NSPid: pid}
	return ev
}

func forkEv(pid int32, t token.Token, ppid int32, pt token.Token, uid uint32) events.Event {
	return events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: pid, Token: t, PPid: ppid, ParentToken: pt,
		Ctx: events.Context{Valid: true, UID: uid, EUID: uid, NSPid: pid, TTY: true, TTYMajor: 136}}
}

func exitEv(pid int32, t token.Token, ppid int32, pt token.Token) events.Event {
	return events.Event{Kind: events.Exit, Mechanism: events.EBPF, Pid: pid, Token: t, PPid: ppid, ParentToken: pt}
}

// parentExe is the executable of ev.Parent, "" when it has none, "<nil>"
// when it is nil.
func parentExe(ev *events.Event) string {
	if ev.Parent == nil {
		return "<nil>"
	}
	return ev.Parent.Exe
}

func TestObserve(t *testing.T) {
	a, a2, b, c := tok(10, 1), tok(10, 2), tok(11, 3), tok(12, 4)
	noIno := tok(20, 0)
	type step struct {
		ev   events.Event
		want string // parentExe after Observe
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"child of a seen exec", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "bash", "-c", "x"), "<nil>"},
			{forkEv(101, b, 100, a, 1000), "/bin/bash"},
			{execEv(101, b, 100, a, "ls", "-l"), "/bin/bash"},
			{exitEv(101, b, 100, a), "/bin/bash"},
		}},
		{"parent exec not seen", Config{}, []step{
			{forkEv(101, b, 100, a, 0), "<nil>"},
			{execEv(101, b, 100, a, "ls"), "<nil>"},
		}},
		{"another instance's token", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "bash"), "<nil>"},
			{forkEv(101, b, 100, a2, 0), "<nil>"},
		}},
		{"same-tick reissue without inode", Config{}, []step{
			{execEv(100, noIno, 1, tok(1, 1), "secret-holder", "--key=k"), "<nil>"},
			{exitEv(100, noIno, 1, tok(1, 1)), "<nil>"},
			{forkEv(100, noIno, 1, tok(1, 1), 0), "<nil>"},
			{forkEv(101, b, 100, noIno, 0), "<nil>"},
		}},
		{"parent that exited still names its late children", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{exitEv(100, a, 1, tok(1, 1)), "<nil>"},
			{exitEv(101, b, 100, a), "/bin/sh"},
		}},
		{"re-exec replaces the program", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{execEv(100, a, 1, tok(1, 1), "python3"), "<nil>"},
			{forkEv(101, b, 100, a, 0), "/bin/python3"},
		}},
		{"exec without a token supersedes the entry", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{execEv(100, token.Token{}, 1, tok(1, 1), "python3"), "<nil>"},
			{forkEv(101, b, 100, a, 0), "<nil>"},
		}},
		{"inferred exec supersedes the entry", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			func() step { e := execEv(100, a, 1, tok(1, 1), "py"); e.Inferred = true; return step{e, "<nil>"} }(),
			{forkEv(101, b, 100, a, 0), "<nil>"},
		}},
		{"lost clears", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{events.Event{Kind: events.Lost, Count: 3}, "<nil>"},
			{forkEv(101, b, 100, a, 0), "<nil>"},
		}},
		{"exited entries are evicted first", Config{Entries: 2}, []step{
			{execEv(100, a, 1, tok(1, 1), "a"), "<nil>"},
			{execEv(200, b, 1, tok(1, 1), "b"), "<nil>"},
			{exitEv(100, a, 1, tok(1, 1)), "<nil>"},
			{execEv(300, c, 1, tok(1, 1), "c"), "<nil>"},
			{forkEv(101, tok(50, 50), 100, a, 0), "<nil>"},
			{forkEv(201, tok(51, 51), 200, b, 0), "/bin/b"},
			{execEv(400, tok(40, 40), 1, tok(1, 1), "d"), "<nil>"},
			{forkEv(202, tok(52, 52), 200, b, 0), "<nil>"},
			{forkEv(301, tok(53, 53), 300, c, 0), "/bin/c"},
		}},
		// The last parent found is remembered as a hint: each case finds
		// a parent, then makes its slot stale.
		{"last parent superseded by a fork at its pid", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{forkEv(101, b, 100, a, 0), "/bin/sh"},
			{forkEv(100, a2, 1, tok(1, 1), 0), "<nil>"},
			{forkEv(102, c, 100, a, 0), "<nil>"},
		}},
		{"last parent's slot reused by another pid", Config{Entries: 1}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{forkEv(101, b, 100, a, 0), "/bin/sh"},
			{execEv(200, c, 1, tok(1, 1), "x"), "<nil>"},
			{forkEv(102, tok(50, 50), 100, a, 0), "<nil>"},
			{forkEv(201, tok(51, 51), 200, c, 0), "/bin/x"},
		}},
		{"last parent's slot reused by another instance at its pid", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{forkEv(101, b, 100, a, 0), "/bin/sh"},
			{execEv(100, a2, 1, tok(1, 1), "py"), "<nil>"},
			{forkEv(102, c, 100, a, 0), "<nil>"},
			{forkEv(103, tok(50, 50), 100, a2, 0), "/bin/py"},
		}},
		{"last parent cleared by a loss", Config{}, []step{
			{execEv(100, a, 1, tok(1, 1), "sh"), "<nil>"},
			{forkEv(101, b, 100, a, 0), "/bin/sh"},
			{events.Event{Kind: events.Lost, Count: 1}, "<nil>"},
			{forkEv(102, c, 100, a, 0), "<nil>"},
		}},
		{"an exec above the byte bound is not kept", Config{Bytes: 16 * 64}, []step{
			{execEv(100, a, 1, tok(1, 1), "a", string(make([]byte, 100))), "<nil>"},
			{forkEv(101, b, 100, a, 0), "<nil>"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.cfg)
			for i, s := range tt.steps {
				ev := s.ev
				c.Observe(&ev)
				if got := parentExe(&ev); got != s.want {
					t.Errorf("step %d (%v of %d): parent executable %q, want %q", i, ev.Kind, ev.Pid, got, s.want)
				}
				checkBounds(t, c)
			}
		})
	}
}

// TestForkRefreshesParent checks that a fork described by the kernel
// gives its creator's entry the ids the child inherited, and not the
// child's own namespace pid.
func TestForkRefreshesParent(t *testing.T) {
	c := New(Config{})
	p := execEv(100, tok(1, 1), 1, tok(0, 9), "sudo")
	c.Observe(&p)
	f := forkEv(101, tok(2, 2), 100, tok(1, 1), 0)
	c.Observe(&f)
	if f.Parent == nil {
		t.Fatal("fork: no parent")
	}
	if got := f.Parent.Ctx; got.UID != 0 || got.EUID != 0 || !got.TTY || got.NSPid != 100 {
		t.Errorf("parent context after fork: uid %d euid %d tty %v nspid %d, want 0 0 true 100", got.UID, got.EUID, got.TTY, got.NSPid)
	}
}

// checkBounds fails when the cache holds more than its bounds.
func checkBounds(t *testing.T, c *Cache) {
	t.Helper()
	st := c.Stats()
	if st.Entries > c.cfg.Entries || st.Bytes > c.cfg.Bytes || st.Entries != c.byPid.Len() {
		t.Fatalf("stats %+v over bounds %+v (index %d)", st, c.cfg, c.byPid.Len())
	}
	var sum int64
	for pid, v := range c.byPid.All() {
		s := &c.slots[v-1]
		if s.pid != pid {
			t.Fatalf("index: pid %d -> slot %d of pid %d", pid, v-1, s.pid)
		}
		sum += s.cost
	}
	if sum != st.Bytes {
		t.Fatalf("bytes charged %d, entries cost %d", st.Bytes, sum)
	}
}

// world is a model of processes: the truth the cache must never
// contradict. Each instance has a token and its current program.
type world struct {
	next  uint64
	procs map[int32]*instance
}

type instance struct {
	pid  int32
	tok  token.Token
	prog string // its image: its parent's at the fork until its first exec
	// execd: prog is the instance's own exec's, which the cache must give
	// whenever it describes it (an inherited one it may have lost).
	execd bool
}

// checkImage fails when what an event or description says a process
// runs contradicts the model: an executable must be in's program, and
// must be there when in exec'd it and the cache described it.
func checkImage(t *testing.T, what, exe string, argv []string, in *instance) {
	t.Helper()
	if exe == "" && !in.execd {
		if len(argv) > 0 {
			t.Fatalf("%s: arguments %q without an executable", what, argv)
		}
		return
	}
	if want := "/bin/" + in.prog; exe != want {
		t.Fatalf("%s: executable %q, want %q", what, exe, want)
	}
	if len(argv) > 0 && argv[0] != in.prog {
		t.Fatalf("%s: arguments %q, want %q first", what, argv, in.prog)
	}
}

// FuzzObserve drives the cache with events of a modelled world, some of
// them lost (followed by a Lost event), and checks that every Parent it
// gives is the parent instance's current program, and that the bounds
// hold.
func FuzzObserve(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add([]byte{1, 1, 1, 33, 2, 66, 3, 99, 4, 130, 200, 7, 9, 250, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := New(Config{Entries: 4, Bytes: 16 * 200})
		w := &world{procs: map[int32]*instance{}}
		root := &instance{pid: 1, tok: tok(1, 1), prog: "init"}
		w.procs[1] = root
		dropping := false
		progs := 0
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			pid := int32(arg%6) + 1
			// Tokens of pids 5 and 6 lack the inode and reuse ticks:
			// same-tick reissues.
			newTok := func() token.Token {
				w.next++
				if pid >= 5 {
					return tok(uint64(pid), 0)
				}
				return tok(w.next, w.next)
			}
			parent := root
			if p := w.procs[int32(arg>>4%6)+1]; p != nil {
				parent = p
			}
			var ev events.Event
			var self *instance // the instance whose image a fork or exit may carry
			switch op % 5 {
			case 0: // fork
				if _, live := w.procs[pid]; live || pid == parent.pid {
					continue
				}
				in := &instance{pid: pid, tok: newTok(), prog: parent.prog}
				w.procs[pid] = in
				ev = forkEv(pid, in.tok, parent.pid, parent.tok, uint32(arg))
				self = &instance{prog: in.prog} // never required: the parent's entry may be gone
			case 1, 2: // exec
				in := w.procs[pid]
				if in == nil || pid == 1 {
					continue
				}
				progs++ // every program's name is its own: a wrong lend cannot pass for a right one
				in.prog = "p" + strconv.Itoa(progs) + string(make([]byte, int(arg)%3*40))
				in.execd = true
				ev = execEv(pid, in.tok, parent.pid, parent.tok, in.prog)
			case 3: // exit
				in := w.procs[pid]
				if in == nil || pid == 1 {
					continue
				}
				delete(w.procs, pid)
				ev = exitEv(pid, in.tok, parent.pid, parent.tok)
				self = &instance{prog: in.prog} // its entry may have been evicted
			case 4: // start or stop losing events
				if dropping {
					ev = events.Event{Kind: events.Lost}
				}
				dropping = !dropping
				if ev.Kind != events.Lost {
					continue
				}
			}
			if dropping {
				continue
			}
			c.Observe(&ev)
			checkBounds(t, c)
			if self != nil {
				checkImage(t, fmt.Sprintf("op %d: %v of %d", i/2, ev.Kind, ev.Pid), ev.Exe, ev.Argv, self)
			}
			if ev.Parent == nil {
				continue
			}
			p := w.procs[ev.PPid]
			if p == nil || p.tok != ev.ParentToken {
				// The parent exited: it must be the instance named.
				continue
			}
			checkImage(t, fmt.Sprintf("op %d: %v of %d: parent %d", i/2, ev.Kind, ev.Pid, ev.PPid), ev.Parent.Exe, ev.Parent.Argv, p)
		}
	})
}

func TestParentIsACopyOfTheExec(t *testing.T) {
	c := New(Config{})
	p := execEv(100, tok(1, 1), 1, tok(0, 9), "sh", "-c", "x")
	c.Observe(&p)
	f := forkEv(101, tok(2, 2), 100, tok(1, 1), 1000)
	c.Observe(&f)
	want := events.Desc{Comm: p.Comm, Exe: p.Exe, Argv: p.Argv, Exec: p.Exec, Ctx: p.Ctx}
	want.Ctx.TTY, want.Ctx.TTYMajor = true, 136
	if !reflect.DeepEqual(*f.Parent, want) {
		t.Errorf("parent %s, want %s", fmt.Sprint(*f.Parent), fmt.Sprint(want))
	}
}

// TestParentArgv checks that a parent's description gives back exactly the
// exec's paths and arguments (nil and empty kept apart, a NUL inside an
// argument kept), on every lookup.
func TestParentArgv(t *testing.T) {
	many := make([]string, 4000)
	for k := range many {
		many[k] = strconv.Itoa(k)
	}
	tests := []struct {
		name string
		argv []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"one empty", []string{""}},
		{"empty inside", []string{"sh", "", "-c", ""}},
		{"unicode", []string{"prog", "héllo wörld", "日本語", "\u2028"}},
		{"NUL inside", []string{"a\x00b", "c"}},
		{"4000 args", many},
		{"4 KiB arg", []string{"x", strings.Repeat("y", 4096)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Config{})
			p := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 100, Token: tok(1, 1), Exe: "/usr/bin/prog", Argv: tt.argv,
				Exec: events.ExecInfo{Cwd: "/home/u", Cgroup: "/docker/abc", ContainerID: "abc", ArgsCount: len(tt.argv)}}
			c.Observe(&p)
			for k := range 2 {
				f := forkEv(int32(101+k), tok(uint64(2+k), uint64(2+k)), 100, tok(1, 1), 0)
				c.Observe(&f)
				d := f.Parent
				if d == nil {
					t.Fatalf("lookup %d: no parent", k)
				}
				if !slices.Equal(d.Argv, tt.argv) || (d.Argv == nil) != (tt.argv == nil) {
					t.Errorf("lookup %d: Argv = %q (nil %v), want %q (nil %v)", k, d.Argv, d.Argv == nil, tt.argv, tt.argv == nil)
				}
				want := p.Exec
				want.OtherIDs = true // the exec's ids were not read
				if d.Exe != p.Exe || d.Exec != want {
					t.Errorf("lookup %d: Exe %q Exec %+v, want %q %+v", k, d.Exe, d.Exec, p.Exe, want)
				}
			}
		})
	}
}

func TestForget(t *testing.T) {
	init1, p, c := tok(1, 1), tok(100, 10), tok(101, 11)
	tests := []struct {
		name      string
		evs       []events.Event
		pid       int32
		tok       token.Token
		forgotten bool
	}{
		{name: "exited", evs: []events.Event{execEv(10, p, 1, init1, "a", "x"), exitEv(10, p, 1, init1)}, pid: 10, tok: p, forgotten: true},
		{name: "live entry kept", evs: []events.Event{execEv(10, p, 1, init1, "a", "x")}, pid: 10, tok: p},
		{name: "another instance's token", evs: []events.Event{execEv(10, p, 1, init1, "a", "x"), exitEv(10, p, 1, init1)}, pid: 10, tok: tok(100, 99)},
		{name: "no entry", pid: 10, tok: p},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := New(Config{})
			for i := range tt.evs {
				cc.Observe(&tt.evs[i])
			}
			before := cc.Stats()
			cc.Forget(tt.pid, tt.tok)
			st := cc.Stats()
			if got := st.Forgotten == 1; got != tt.forgotten {
				t.Fatalf("Forgotten %d, want forgotten %v", st.Forgotten, tt.forgotten)
			}
			if tt.forgotten && (st.Entries != before.Entries-1 || st.Bytes >= before.Bytes) {
				t.Errorf("after Forget: %d entries, %d bytes; before %d, %d", st.Entries, st.Bytes, before.Entries, before.Bytes)
			}
			// A child event naming the instance finds its description only
			// when there was one and it was kept.
			ev := forkEv(11, c, 10, p, 0)
			cc.Observe(&ev)
			if got, want := ev.Parent != nil, len(tt.evs) > 0 && !tt.forgotten; got != want {
				t.Errorf("parent described %v after Forget, want %v", got, want)
			}
			checkBounds(t, cc)
		})
	}
}

// TestImage checks the image a fork gets, the executable an exit gets,
// and the description of a parent that forked without an exec of its
// own: the executable and arguments of the image it inherited, its own
// name and context, and nothing once that image's entry has moved on.
func TestImage(t *testing.T) {
	init1, a, b, g := tok(1, 1), tok(10, 10), tok(11, 11), tok(12, 12)
	cg := func(ev events.Event, id uint64) events.Event {
		ev.Ctx.CgroupID = id
		return ev
	}
	shell := cg(execEv(100, a, 1, init1, "nginx", "-g", "daemon off;"), 7)
	shell.Exec.Cgroup, shell.Exec.ContainerID, shell.Exec.ContainerRuntime = "/docker/abc", "abc", "docker"
	shell.Exec.ArgsRedacted = true
	named := func(ev events.Event, comm string) events.Event {
		copy(ev.Comm[:], comm)
		return ev
	}
	type step struct {
		ev         events.Event
		exe        string // the event's own executable after Observe
		argv       string // and its arguments, joined by spaces
		container  string
		parentExe  string // parentExe of the event
		parentName string
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"a worker forked from an exec'd master", Config{}, []step{
			{ev: shell, exe: "/bin/nginx", argv: "nginx -g daemon off;", container: "abc", parentExe: "<nil>"},
			{ev: named(cg(forkEv(101, b, 100, a, 33), 7), "nginx"), exe: "/bin/nginx", argv: "nginx -g daemon off;", container: "abc", parentExe: "/bin/nginx", parentName: "nginx"},
			{ev: cg(forkEv(102, g, 101, b, 33), 7), exe: "/bin/nginx", argv: "nginx -g daemon off;", container: "abc", parentExe: "/bin/nginx", parentName: "nginx"},
			{ev: execEv(102, g, 101, b, "sh", "-c", "id"), exe: "/bin/sh", argv: "sh -c id", parentExe: "/bin/nginx"},
			{ev: exitEv(102, g, 101, b), exe: "/bin/sh", parentExe: "/bin/nginx"},
			{ev: exitEv(101, b, 100, a), exe: "/bin/nginx", parentExe: "/bin/nginx"},
		}},
		{"a fork into another cgroup has no container", Config{}, []step{
			{ev: shell, exe: "/bin/nginx", argv: "nginx -g daemon off;", container: "abc", parentExe: "<nil>"},
			{ev: cg(forkEv(101, b, 100, a, 33), 8), exe: "/bin/nginx", argv: "nginx -g daemon off;", parentExe: "/bin/nginx"},
		}},
		{"the master's re-exec takes the image from its workers", Config{}, []step{
			{ev: execEv(100, a, 1, init1, "sh", "x"), exe: "/bin/sh", argv: "sh x", parentExe: "<nil>"},
			{ev: named(forkEv(101, b, 100, a, 0), "sh"), exe: "/bin/sh", argv: "sh x", parentExe: "/bin/sh"},
			{ev: execEv(100, a, 1, init1, "python3"), exe: "/bin/python3", argv: "python3", parentExe: "<nil>"},
			{ev: forkEv(102, g, 101, b, 0), parentExe: "", parentName: "sh"},
			{ev: exitEv(101, b, 100, a), parentExe: "/bin/python3"},
		}},
		{"the image's entry evicted", Config{Entries: 2}, []step{
			{ev: execEv(100, a, 1, init1, "sh"), exe: "/bin/sh", argv: "sh", parentExe: "<nil>"},
			{ev: forkEv(101, b, 100, a, 0), exe: "/bin/sh", argv: "sh", parentExe: "/bin/sh"},
			{ev: exitEv(100, a, 1, init1), exe: "/bin/sh", parentExe: "<nil>"},
			{ev: execEv(200, tok(20, 20), 1, init1, "x"), exe: "/bin/x", argv: "x", parentExe: "<nil>"},
			{ev: exitEv(101, b, 100, a), parentExe: "<nil>"},
		}},
		{"a full cache makes no room for a fork's entry", Config{Entries: 1}, []step{
			{ev: execEv(100, a, 1, init1, "sh"), exe: "/bin/sh", argv: "sh", parentExe: "<nil>"},
			{ev: forkEv(101, b, 100, a, 0), exe: "/bin/sh", argv: "sh", parentExe: "/bin/sh"},
			{ev: exitEv(101, b, 100, a), parentExe: "/bin/sh"},
			{ev: forkEv(102, g, 101, b, 0), parentExe: "<nil>"},
		}},
		{"a prefork master outlives its workers' entries", Config{Entries: 3}, []step{
			{ev: execEv(100, a, 1, init1, "httpd"), exe: "/bin/httpd", argv: "httpd", parentExe: "<nil>"},
			{ev: forkEv(101, b, 100, a, 0), exe: "/bin/httpd", argv: "httpd", parentExe: "/bin/httpd"},
			{ev: forkEv(102, g, 100, a, 0), exe: "/bin/httpd", argv: "httpd", parentExe: "/bin/httpd"},
			{ev: execEv(200, tok(20, 20), 1, init1, "x"), exe: "/bin/x", argv: "x", parentExe: "<nil>"},
			{ev: forkEv(103, tok(13, 13), 100, a, 0), exe: "/bin/httpd", argv: "httpd", parentExe: "/bin/httpd"},
			{ev: forkEv(104, tok(14, 14), 100, a, 0), exe: "/bin/httpd", argv: "httpd", parentExe: "/bin/httpd"},
			{ev: forkEv(300, tok(30, 30), 104, tok(14, 14), 0), exe: "/bin/httpd", argv: "httpd", parentExe: "/bin/httpd"},
			{ev: forkEv(301, tok(31, 31), 101, b, 0), parentExe: "<nil>"},
		}},
		{"a fork whose parent has no entry", Config{}, []step{
			{ev: forkEv(101, b, 100, a, 0), parentExe: "<nil>"},
			{ev: exitEv(101, b, 100, a), parentExe: "<nil>"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.cfg)
			for i, s := range tt.steps {
				ev := s.ev
				c.Observe(&ev)
				checkBounds(t, c)
				if ev.Exe != s.exe || strings.Join(ev.Argv, " ") != s.argv || ev.Exec.ContainerID != s.container {
					t.Errorf("step %d (%v of %d): image %q %q container %q, want %q %q %q",
						i, ev.Kind, ev.Pid, ev.Exe, ev.Argv, ev.Exec.ContainerID, s.exe, s.argv, s.container)
				}
				if ev.Kind != events.Exec {
					if ev.Exec.Cwd != "" {
						t.Errorf("step %d (%v of %d): working directory %q lent, want none", i, ev.Kind, ev.Pid, ev.Exec.Cwd)
					}
					if s.exe == "/bin/nginx" && ev.Kind == events.Fork && !ev.Exec.ArgsRedacted {
						t.Errorf("step %d (%v of %d): the image's redaction mark not lent", i, ev.Kind, ev.Pid)
					}
					if s.exe != "" && ev.Exec.ArgsCount != len(ev.Argv) {
						t.Errorf("step %d (%v of %d): args_count %d, want %d", i, ev.Kind, ev.Pid, ev.Exec.ArgsCount, len(ev.Argv))
					}
				}
				if got := parentExe(&ev); got != s.parentExe {
					t.Errorf("step %d (%v of %d): parent executable %q, want %q", i, ev.Kind, ev.Pid, got, s.parentExe)
				}
				if s.parentName != "" && (ev.Parent == nil || strings.TrimRight(string(ev.Parent.Comm[:]), "\x00") != s.parentName) {
					t.Errorf("step %d (%v of %d): parent %+v, want named %q", i, ev.Kind, ev.Pid, ev.Parent, s.parentName)
				}
			}
		})
	}
}

// TestOtherIDs checks which images are marked as exec'd with ids other
// than the ones their event or description carries: a fork's from a
// parent whose ids changed since its exec, a description refreshed by
// such a fork, every exit's; not a fork's whose ids are the exec's.
func TestOtherIDs(t *testing.T) {
	init1, a, b, g := tok(1, 1), tok(10, 10), tok(11, 11), tok(12, 12)
	root := func(ev events.Event) events.Event { ev.Ctx.UID, ev.Ctx.EUID = 0, 0; return ev }
	type step struct {
		ev          events.Event
		other       bool   // ev.Exec.OtherIDs after Observe
		parentOther string // of ev.Parent: "" when nil, else "true" or "false"
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the same ids", []step{
			{ev: execEv(100, a, 1, init1, "sh"), other: false},
			{ev: forkEv(101, b, 100, a, 1000), other: false, parentOther: "false"},
			{ev: forkEv(102, g, 101, b, 1000), other: false, parentOther: "false"},
			{ev: exitEv(102, g, 101, b), other: true, parentOther: "false"},
		}},
		{"a root program that dropped to a user", []step{
			{ev: root(execEv(100, a, 1, init1, "secretd", "--password=x")), other: false},
			{ev: forkEv(101, b, 100, a, 1000), other: true, parentOther: "true"},
			{ev: forkEv(102, g, 101, b, 1000), other: true, parentOther: "true"},
		}},
		{"a parent whose ids a fork refreshed", []step{
			{ev: execEv(100, a, 1, init1, "sh"), other: false},
			{ev: forkEv(101, b, 100, a, 0), other: true, parentOther: "true"},
			{ev: execEv(101, b, 100, a, "ls"), other: false, parentOther: "true"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Config{})
			for i, s := range tt.steps {
				ev := s.ev
				c.Observe(&ev)
				if ev.Exec.OtherIDs != s.other {
					t.Errorf("step %d (%v of %d): OtherIDs %v, want %v", i, ev.Kind, ev.Pid, ev.Exec.OtherIDs, s.other)
				}
				got := ""
				if ev.Parent != nil {
					got = strconv.FormatBool(ev.Parent.Exec.OtherIDs)
				}
				if got != s.parentOther {
					t.Errorf("step %d (%v of %d): parent OtherIDs %q, want %q", i, ev.Kind, ev.Pid, got, s.parentOther)
				}
			}
		})
	}
}

// TestImageNumbers checks that every image kept has a number of its own,
// carried by every event and description that carries the image, and
// that a re-exec, another instance and a loss never bring one back.
func TestImageNumbers(t *testing.T) {
	c := New(Config{})
	init1 := tok(1, 1)
	seen := map[uint64]bool{}
	fresh := func(ev *events.Event) {
		t.Helper()
		if ev.Exec.Image == 0 || seen[ev.Exec.Image] {
			t.Fatalf("%v of %d: image number %d, want a new one", ev.Kind, ev.Pid, ev.Exec.Image)
		}
		seen[ev.Exec.Image] = true
	}
	sh := execEv(100, tok(10, 10), 1, init1, "sh")
	c.Observe(&sh)
	fresh(&sh)
	fork := forkEv(101, tok(11, 11), 100, sh.Token, 1000)
	c.Observe(&fork)
	if fork.Exec.Image != sh.Exec.Image || fork.Parent.Exec.Image != sh.Exec.Image {
		t.Errorf("fork: image %d, parent's %d, want %d", fork.Exec.Image, fork.Parent.Exec.Image, sh.Exec.Image)
	}
	grand := forkEv(102, tok(12, 12), 101, fork.Token, 1000)
	c.Observe(&grand)
	if grand.Parent == nil || grand.Parent.Exec.Image != sh.Exec.Image {
		t.Errorf("grandchild's parent: %+v, want image %d", grand.Parent, sh.Exec.Image)
	}
	again := execEv(100, sh.Token, 1, init1, "sh", "again")
	c.Observe(&again)
	fresh(&again)
	other := execEv(100, tok(20, 20), 1, init1, "sh")
	c.Observe(&other)
	fresh(&other)
	lost := events.Event{Kind: events.Lost}
	c.Observe(&lost)
	after := execEv(100, tok(21, 21), 1, init1, "sh")
	c.Observe(&after)
	fresh(&after)
	exit := exitEv(100, after.Token, 1, init1)
	c.Observe(&exit)
	if exit.Exec.Image != after.Exec.Image {
		t.Errorf("exit: image %d, want %d", exit.Exec.Image, after.Exec.Image)
	}
}
