package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// ecsID is an ECS user or group object.
type ecsID struct {
	ID string `json:"id"`
}

// ecsProc is what the feed storm reads of a process or its parent.
type ecsProc struct {
	Pid      int      `json:"pid"`
	EntityID string   `json:"entity_id"`
	Args     []string `json:"args"`
	Cwd      string   `json:"working_directory"`
	User     *ecsID   `json:"user"`
	RealUser *ecsID   `json:"real_user"`
	Group    *ecsID   `json:"group"`
}

// ecsLine is a process line of the feed.
type ecsLine struct {
	Event struct {
		Action string `json:"action"`
	} `json:"event"`
	Process struct {
		ecsProc
		Parent ecsProc `json:"parent"`
	} `json:"process"`
}

// feedShell is one shell of the feed storm and what its lines must say.
type feedShell struct {
	argv     []string
	dir      string
	uid, gid uint32
	pid      int
}

// TestIntegrationFeedStorm runs shells several at a time under the daemon
// (all process lines to its ECS feed, eBPF then netlink), each in a
// working directory of its own, as one of four users, with its own
// arguments, each running sleep; and checks the feed line by line. A
// shell's exec line holds its arguments, directory and ids; its sleep's
// fork line the shell's ids, and its exec line the same directory and
// ids; both lines have the shell as the parent
// (pid, entity_id, arguments, directory, user) from the daemon's exec
// cache: never another shell's, whatever ran at the same time. With
// netlink a part /proc did not give is absent, never wrong.
func TestIntegrationFeedStorm(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			logPath, stop := runFeedDaemon(t, mech, logfeed.AllKinds)
			base, err := os.MkdirTemp("", "feedstorm")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			if err := os.Chmod(base, 0o755); err != nil {
				t.Fatal(err)
			}
			if base, err = filepath.EvalSymlinks(base); err != nil {
				t.Fatal(err)
			}
			users := []uint32{0, 65534, 1000, 1001}
			payloads := [][]string{{"-a", "--flag=value"}, {"", "é✓日本", ""}, {"line1\nline2", `q"b\`}, nil}
			var shells []*feedShell
			for i := range 48 {
				dir := filepath.Join(base, "d-"+strconv.Itoa(i)+[]string{"", " sp", "-é"}[i%3])
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				marker := fmt.Sprintf("feedstorm-%d-%d", os.Getpid(), i)
				shells = append(shells, &feedShell{
					argv: append([]string{"/bin/sh", "-c", "sleep 0.2; :", marker}, payloads[i%len(payloads)]...),
					dir:  dir, uid: users[i%len(users)], gid: users[(i+1)%len(users)],
				})
			}
			cmds := make([]*exec.Cmd, len(shells))
			for i, s := range shells {
				c := exec.Command(s.argv[0], s.argv[1:]...)
				c.Dir, c.Env = s.dir, []string{"PATH=/usr/bin:/bin"}
				c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid}}
				cmds[i] = c
			}
			// The daemon in this process reaps children too: RunEach
			// takes ECHILD as run.
			testenv.RunEach(t, 6, cmds)
			for i, s := range shells {
				s.pid = cmds[i].Process.Pid
			}
			bpid := runChild(t, "/bin/true", fmt.Sprintf("feedstorm-%d-barrier", os.Getpid()))
			testenv.Eventually(t, 20*time.Second, func() bool {
				return len(processLines(t, logPath, bpid)) > 0
			}, "never a line of the barrier (pid %d)", bpid)
			stop()

			// The exec and fork lines, by pid.
			execs, forks := map[int][]ecsLine{}, map[int][]ecsLine{}
			log := readLog(logPath)
			for l := range strings.SplitSeq(strings.TrimSuffix(log, "\n"), "\n") {
				var m ecsLine
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("feed line %q: %v", l, err)
				}
				switch m.Event.Action {
				case logfeed.ActionProcessExec:
					execs[m.Process.Pid] = append(execs[m.Process.Pid], m)
				case logfeed.ActionProcessStarted:
					forks[m.Process.Pid] = append(forks[m.Process.Pid], m)
				}
			}
			// children: the exec lines of the processes whose parent is
			// pid (the shells' sleeps: a shell runs nothing else). Not
			// told by their arguments, which a netlink line may lack.
			children := func(pid int) []ecsLine {
				var out []ecsLine
				for _, ls := range execs {
					for _, l := range ls {
						if l.Process.Parent.Pid == pid && l.Process.Pid != pid {
							out = append(out, l)
						}
					}
				}
				return out
			}
			present := map[string]int{}
			// expect checks one field of a line: has says the line carries
			// it (every eBPF line must; netlink's may not), ok that it is
			// what the shell set.
			expect := func(s *feedShell, what string, has, ok bool, got, want any) {
				if !has && mech != "ebpf" {
					return
				}
				present[what]++
				if !has || !ok {
					t.Errorf("%s: %s %v, want %v", s.argv[3], what, got, want)
				}
			}
			is := func(id *ecsID, want uint32) bool { return id != nil && id.ID == strconv.Itoa(int(want)) }
			for _, s := range shells {
				ls := execs[s.pid]
				if len(ls) != 1 {
					t.Errorf("%s: %d exec lines of pid %d, want 1", s.argv[3], len(ls), s.pid)
					continue
				}
				p := ls[0].Process.ecsProc
				expect(s, "args", p.Args != nil, slices.Equal(p.Args, s.argv), p.Args, s.argv)
				expect(s, "cwd", p.Cwd != "", p.Cwd == s.dir, p.Cwd, s.dir)
				expect(s, "user", p.User != nil, is(p.User, s.uid) && is(p.RealUser, s.uid) && is(p.Group, s.gid),
					[]*ecsID{p.User, p.RealUser, p.Group}, []uint32{s.uid, s.uid, s.gid})
				kids := children(s.pid)
				if len(kids) != 1 {
					t.Errorf("%s: %d exec lines of sleep under pid %d, want 1", s.argv[3], len(kids), s.pid)
					continue
				}
				k := kids[0].Process
				// The fork that made the sleep: the shell's ids, inherited,
				// and the shell as its parent.
				if fs := forks[k.Pid]; len(fs) != 1 {
					t.Errorf("%s: %d fork lines of its sleep (pid %d), want 1", s.argv[3], len(fs), k.Pid)
				} else {
					f := fs[0].Process
					expect(s, "fork.user", f.User != nil, is(f.User, s.uid) && is(f.Group, s.gid),
						[]*ecsID{f.User, f.Group}, []uint32{s.uid, s.gid})
					if f.Parent.Pid != s.pid || f.Parent.EntityID != p.EntityID {
						t.Errorf("%s: its sleep's fork line has parent %d %q, want the shell %d %q", s.argv[3], f.Parent.Pid, f.Parent.EntityID, s.pid, p.EntityID)
					}
					expect(s, "fork.parent.args", f.Parent.Args != nil, slices.Equal(f.Parent.Args, s.argv), f.Parent.Args, s.argv)
				}
				expect(s, "sleep.args", k.Args != nil, slices.Equal(k.Args, []string{"sleep", "0.2"}), k.Args, []string{"sleep", "0.2"})
				expect(s, "sleep.cwd", k.Cwd != "", k.Cwd == s.dir, k.Cwd, s.dir)
				expect(s, "sleep.user", k.User != nil, is(k.User, s.uid), k.User, s.uid)
				par := k.Parent
				if par.EntityID != p.EntityID || par.EntityID == "" {
					t.Errorf("%s: its sleep's parent entity_id %q, want the shell's %q", s.argv[3], par.EntityID, p.EntityID)
				}
				expect(s, "parent.args", par.Args != nil, slices.Equal(par.Args, s.argv), par.Args, s.argv)
				expect(s, "parent.cwd", par.Cwd != "", par.Cwd == s.dir, par.Cwd, s.dir)
				expect(s, "parent.user", par.User != nil, is(par.User, s.uid), par.User, s.uid)
			}
			t.Logf("%s: %d shells; checked: %v", mech, len(shells), present)
			for _, what := range []string{"args", "cwd", "user", "parent.args", "parent.cwd", "parent.user", "fork.user", "fork.parent.args"} {
				// netlink's forks carry no ids: /proc is read at an exec,
				// and the creator's of then may have changed since.
				if present[what] == 0 && !(mech == "netlink" && what == "fork.user") {
					t.Errorf("no line carried %s: nothing was checked", what)
				}
			}
		})
	}
}
