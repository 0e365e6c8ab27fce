package tracker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// stormArgvMax is the argv bound both sources use by default (the eBPF
// exec program's and the /proc reader's).
const stormArgvMax = 32 << 10

// stormProc is one process of the context storm: what it is started with,
// and so what its exec event must say.
type stormProc struct {
	marker   string
	argv     []string
	dir      string
	uid, gid uint32
	groups   []uint32
	pid      int32
}

// stormPayloads are the arguments after the marker, by process number.
var stormPayloads = []func() []string{
	func() []string { return []string{"-a", "--flag=value", "a b"} },
	func() []string { return []string{"", "é✓日本", "", "tab\there", ""} },
	func() []string { // 4,000 arguments, under the bound
		a := make([]string, 4000)
		for i := range a {
			a[i] = "x" + strconv.Itoa(i)
		}
		return a
	},
	func() []string { // 1 MiB of arguments, cut by the bound
		a := make([]string, 256)
		for i := range a {
			a[i] = strings.Repeat(string(rune('a'+i%26)), 4095)
		}
		return a
	},
	func() []string { return nil },
	func() []string { return []string{"line1\nline2", "\x01\x7f", `quote"back\`} },
}

// newStorm makes n processes under base, each with a working directory
// of its own (some with spaces or non-ASCII in the name), one of four
// users and groups, and its own arguments.
func newStorm(t *testing.T, base string, n int) []*stormProc {
	t.Helper()
	users := []uint32{0, 65534, 1000, 1001}
	var ps []*stormProc
	for i := range n {
		name := "d-" + strconv.Itoa(i)
		switch i % 3 {
		case 1:
			name += " with space"
		case 2:
			name += "-é日本"
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf("ctxstorm-%d-%d", os.Getpid(), i)
		// Most wait for sleep, so that netlink's /proc reads find them;
		// one in five exits at once, which netlink may miss.
		script := "sleep 0.3; :"
		if i%5 == 4 {
			script = ":"
		}
		argv := append([]string{"/bin/sh", "-c", script, marker}, stormPayloads[i%len(stormPayloads)]()...)
		p := &stormProc{marker: marker, argv: argv, dir: dir, uid: users[i%len(users)], gid: users[(i+1)%len(users)]}
		if i%2 == 1 {
			p.groups = []uint32{5000 + uint32(i%7), 6000}
		}
		ps = append(ps, p)
	}
	return ps
}

func (p *stormProc) cmd() *exec.Cmd {
	c := exec.Command(p.argv[0], p.argv[1:]...)
	c.Dir = p.dir
	c.Env = []string{"PATH=/usr/bin:/bin"}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: p.uid, Gid: p.gid, Groups: p.groups}}
	return c
}

// stormSeen is what the test keeps of an exec event.
type stormSeen struct {
	pid  int32
	ppid int32
	exe  string
	argv []string
	x    events.ExecInfo
	ctx  events.Context
}

// stormRecorder keeps the exec events whose fourth argument is a storm
// marker, those without arguments by pid, and whether a loss was
// reported.
type stormRecorder struct {
	prefix string
	kind   events.Kind // Exec, or Fork for the poller's inferred ones
	mu     sync.Mutex
	execs  map[string][]stormSeen // by marker
	lost   bool
}

func (r *stormRecorder) onEvent(ev *events.Event) {
	if ev.Kind == r.kind {
		c := ev.Clone() // kept: an event's strings live until the next one
		ev = &c
	}
	switch {
	case ev.Kind == events.Lost:
		r.mu.Lock()
		r.lost = true
		r.mu.Unlock()
	case ev.Kind == r.kind && len(ev.Argv) > 3 && strings.HasPrefix(ev.Argv[3], r.prefix):
		s := stormSeen{pid: ev.Pid, ppid: ev.PPid, exe: ev.Exe, argv: ev.Argv, x: ev.Exec, ctx: ev.Ctx}
		r.mu.Lock()
		r.execs[ev.Argv[3]] = append(r.execs[ev.Argv[3]], s)
		r.mu.Unlock()
	case ev.Kind == r.kind && ev.Argv == nil:
		// netlink could not read the arguments: keep the event by pid
		// (the test matches its processes' pids).
		s := stormSeen{pid: ev.Pid, exe: ev.Exe, x: ev.Exec, ctx: ev.Ctx}
		r.mu.Lock()
		key := "pid:" + strconv.Itoa(int(ev.Pid))
		r.execs[key] = append(r.execs[key], s)
		r.mu.Unlock()
	}
}

// TestIntegrationContextStorm runs a storm of processes that differ in
// everything an exec event describes (arguments with empty, non-ASCII and
// control bytes, 4,000 arguments, 1 MiB of them, working directories,
// users, groups) several at a time, and checks each one's exec event
// against what it was started with. With eBPF every context is exact, and
// the 1 MiB vector is cut at the bound and says so with its real count and
// size. With netlink what /proc gave is exact and what it did not is
// absent (nil argv, empty paths, Ctx.Valid false), never another
// process's: a context that crossed between concurrent execs fails either.
// The /proc poller sees only the processes alive at one of its snapshots
// (every second): those it saw are held to netlink's rule.
func TestIntegrationContextStorm(t *testing.T) {
	for _, tt := range []struct {
		mech string
		kind events.Kind
		all  bool // every process must be seen
	}{
		{"ebpf", events.Exec, true},
		{"netlink", events.Exec, true},
		{"proc", events.Fork, false},
	} {
		mech := tt.mech
		t.Run(mech, func(t *testing.T) {
			testenv.RequireRoot(t)
			boot, err := procfs.ReadBootID("/proc")
			if err != nil {
				t.Fatal(err)
			}
			base, err := os.MkdirTemp("", "ctxstorm")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			if err := os.Chmod(base, 0o755); err != nil { // the other users' working directories are in it
				t.Fatal(err)
			}
			if base, err = filepath.EvalSymlinks(base); err != nil {
				t.Fatal(err)
			}
			sh, err := filepath.EvalSymlinks("/bin/sh")
			if err != nil {
				t.Fatal(err)
			}
			rec := &stormRecorder{prefix: fmt.Sprintf("ctxstorm-%d-", os.Getpid()), kind: tt.kind, execs: map[string][]stormSeen{}}
			tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, OnEvent: rec.onEvent,
				ExecContext: func() bool { return true }})
			if err != nil {
				testenv.Skip(t, "mechanism %s: %v", mech, err)
			}
			defer tr.Close()

			procs := newStorm(t, base, 96)
			run := func(ps []*stormProc, parallel int) {
				t.Helper()
				cmds := make([]*exec.Cmd, len(ps))
				for i, p := range ps {
					cmds[i] = p.cmd()
				}
				testenv.RunEach(t, parallel, cmds)
				for i, p := range ps {
					p.pid = int32(cmds[i].Process.Pid)
				}
			}
			// find returns the exec events that carry p's marker, or with
			// netlink, when none does, the argument-less ones of its pid.
			find := func(p *stormProc) ([]stormSeen, bool) {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if s := rec.execs[p.marker]; len(s) > 0 {
					return slices.Clone(s), true
				}
				if s := rec.execs["pid:"+strconv.Itoa(int(p.pid))]; len(s) > 0 && mech == "netlink" {
					return s[:1], true
				}
				return nil, false
			}
			run(procs, 6)
			// Every exec reaches the tracker (an exec the ring could
			// not take is a reported loss: its process runs again).
			for try := 0; tt.all; try++ {
				var missing []*stormProc
				testenv.Poll(10*time.Second, func() bool {
					missing = missing[:0]
					for _, p := range procs {
						if _, ok := find(p); !ok {
							missing = append(missing, p)
						}
					}
					return len(missing) == 0
				})
				if len(missing) == 0 {
					break
				}
				rec.mu.Lock()
				lost := rec.lost
				rec.mu.Unlock()
				if !lost || try == 2 {
					t.Fatalf("%d of %d execs never seen (first %s, pid %d); a loss reported: %v", len(missing), len(procs), missing[0].marker, missing[0].pid, lost)
				}
				t.Logf("%d execs lost (reported): running them again", len(missing))
				run(missing, 1)
			}

			present := map[string]int{}
			for _, p := range procs {
				all, ok := find(p)
				if !ok {
					continue // the poller's snapshots missed it
				}
				// The poller may find sh's child between its fork and
				// its exec of sleep: it has its parent's arguments then,
				// rightly. Any other pid with them is a context crossed.
				own := all[:0:0]
				for _, s := range all {
					switch {
					case s.pid == p.pid:
						own = append(own, s)
					case mech == "proc" && s.ppid == p.pid && s.pid != 0:
					default:
						t.Errorf("%s: the exec of pid %d (parent %d) carries the arguments of pid %d", p.marker, s.pid, s.ppid, p.pid)
					}
				}
				if len(own) == 0 {
					continue // the poller saw only its child
				}
				present["seen"]++
				s := own[len(own)-1]
				if s.argv != nil {
					present["argv"]++
					checkStormArgv(t, p, s)
				} else if mech == "ebpf" {
					t.Errorf("%s: eBPF exec without arguments", p.marker)
				}
				if s.exe != "" {
					present["exe"]++
					if s.exe != sh || s.x.ExeTruncated {
						t.Errorf("%s: executable %q (truncated %v), want %q", p.marker, s.exe, s.x.ExeTruncated, sh)
					}
				} else if mech == "ebpf" {
					t.Errorf("%s: eBPF exec without its executable", p.marker)
				}
				if s.x.Cwd != "" {
					present["cwd"]++
					if s.x.Cwd != p.dir || s.x.CwdTruncated {
						t.Errorf("%s: working directory %q (truncated %v), want %q", p.marker, s.x.Cwd, s.x.CwdTruncated, p.dir)
					}
				} else if mech == "ebpf" {
					t.Errorf("%s: eBPF exec without its working directory", p.marker)
				}
				if s.ctx.Valid {
					present["ids"]++
					checkStormIDs(t, p, s.ctx)
				} else if mech == "ebpf" {
					t.Errorf("%s: eBPF exec without its context", p.marker)
				}
			}
			t.Logf("%s: %d execs; present: %v", mech, len(procs), present)
			for _, what := range []string{"argv", "exe", "cwd", "ids"} {
				if present[what] == 0 {
					t.Errorf("%s: no exec carried its %s: nothing was checked", mech, what)
				}
			}
		})
	}
}

// checkStormArgv compares an exec's arguments, count, size and cut with
// what p was started with under the sources' bound.
func checkStormArgv(t *testing.T, p *stormProc, s stormSeen) {
	t.Helper()
	size := 0
	for _, a := range p.argv {
		size += len(a) + 1
	}
	truncated := size > stormArgvMax
	if s.x.ArgsCount != len(p.argv) || s.x.ArgsSize != size || s.x.ArgsTruncated != truncated {
		t.Errorf("%s: args count %d size %d truncated %v, want %d %d %v", p.marker,
			s.x.ArgsCount, s.x.ArgsSize, s.x.ArgsTruncated, len(p.argv), size, truncated)
		return
	}
	if !truncated {
		if !slices.Equal(s.argv, p.argv) {
			t.Errorf("%s: argv differs from what the process received (%d arguments, want %d)", p.marker, len(s.argv), len(p.argv))
		}
		return
	}
	want := strings.TrimSuffix((strings.Join(p.argv, "\x00") + "\x00")[:stormArgvMax], "\x00")
	if got := strings.Join(s.argv, "\x00"); got != want {
		t.Errorf("%s: cut argv (%d bytes) is not the first %d bytes of the real one", p.marker, len(got), len(want))
	}
}

// checkStormIDs compares an exec's ids with what p was started with.
func checkStormIDs(t *testing.T, p *stormProc, c events.Context) {
	t.Helper()
	if c.UID != p.uid || c.EUID != p.uid || c.SUID != p.uid || c.GID != p.gid || c.EGID != p.gid || c.SGID != p.gid {
		t.Errorf("%s: uids %d/%d/%d gids %d/%d/%d, want %d and %d", p.marker, c.UID, c.EUID, c.SUID, c.GID, c.EGID, c.SGID, p.uid, p.gid)
	}
	if got := c.Groups[:min(c.NGroups, events.MaxGroups)]; !slices.Equal(got, p.groups) && !(len(got) == 0 && len(p.groups) == 0) {
		t.Errorf("%s: supplementary groups %v, want %v", p.marker, got, p.groups)
	}
}
