package daemon

import (
	"encoding/json"
	"errors"
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
			var wg sync.WaitGroup
			sem := make(chan struct{}, 6)
			errs := make(chan error, len(shells))
			for _, s := range shells {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					c := exec.Command(s.argv[0], s.argv[1:]...)
					c.Dir, c.Env = s.dir, []string{"PATH=/usr/bin:/bin"}
					c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid}}
					// The daemon in this process reaps children too
					// (ECHILD then): the shell ran.
					if out, err := c.CombinedOutput(); err != nil && !errors.Is(err, syscall.ECHILD) {
						errs <- fmt.Errorf("%q: %v: %s", s.argv, err, out)
						return
					}
					s.pid = c.Process.Pid
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
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
			// pid (the shells' sleeps).
			children := func(pid int) []ecsLine {
				var out []ecsLine
				for _, ls := range execs {
					for _, l := range ls {
						if l.Process.Parent.Pid == pid && len(l.Process.Args) > 0 && l.Process.Args[0] == "sleep" {
							out = append(out, l)
						}
					}
				}
				return out
			}
			uid := func(s *feedShell) string { return strconv.Itoa(int(s.uid)) }
			gid := func(s *feedShell) string { return strconv.Itoa(int(s.gid)) }
			present := map[string]int{}
			for _, s := range shells {
				ls := execs[s.pid]
				if len(ls) != 1 {
					t.Errorf("%s: %d exec lines of pid %d, want 1", s.argv[3], len(ls), s.pid)
					continue
				}
				p := ls[0].Process.ecsProc
				if p.Args != nil || mech == "ebpf" {
					present["args"]++
					if !slices.Equal(p.Args, s.argv) {
						t.Errorf("%s: process.args %q, want %q", s.argv[3], p.Args, s.argv)
					}
				}
				if p.Cwd != "" || mech == "ebpf" {
					present["cwd"]++
					if p.Cwd != s.dir {
						t.Errorf("%s: process.working_directory %q, want %q", s.argv[3], p.Cwd, s.dir)
					}
				}
				if p.User != nil || mech == "ebpf" {
					present["user"]++
					if p.User == nil || p.User.ID != uid(s) || p.RealUser == nil || p.RealUser.ID != uid(s) || p.Group == nil || p.Group.ID != gid(s) {
						t.Errorf("%s: process user %+v real_user %+v group %+v, want %s and %s", s.argv[3], p.User, p.RealUser, p.Group, uid(s), gid(s))
					}
				}
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
					if f.User != nil || mech == "ebpf" {
						present["fork.user"]++
						if f.User == nil || f.User.ID != uid(s) || f.Group == nil || f.Group.ID != gid(s) {
							t.Errorf("%s: its sleep's fork line has user %+v group %+v, want %s and %s", s.argv[3], f.User, f.Group, uid(s), gid(s))
						}
					}
					if f.Parent.Pid != s.pid || f.Parent.EntityID != p.EntityID {
						t.Errorf("%s: its sleep's fork line has parent %d %q, want the shell %d %q", s.argv[3], f.Parent.Pid, f.Parent.EntityID, s.pid, p.EntityID)
					}
					if f.Parent.Args != nil || p.Args != nil && mech == "ebpf" {
						present["fork.parent.args"]++
						if !slices.Equal(f.Parent.Args, s.argv) {
							t.Errorf("%s: its sleep's fork line has process.parent.args %q, want the shell's %q", s.argv[3], f.Parent.Args, s.argv)
						}
					}
				}
				if k.Cwd != "" || mech == "ebpf" {
					if k.Cwd != s.dir {
						t.Errorf("%s: its sleep's working_directory %q, want %q", s.argv[3], k.Cwd, s.dir)
					}
				}
				if k.User != nil || mech == "ebpf" {
					if k.User == nil || k.User.ID != uid(s) {
						t.Errorf("%s: its sleep's user %+v, want %s", s.argv[3], k.User, uid(s))
					}
				}
				par := k.Parent
				if par.EntityID != p.EntityID || par.EntityID == "" {
					t.Errorf("%s: its sleep's parent entity_id %q, want the shell's %q", s.argv[3], par.EntityID, p.EntityID)
				}
				if par.Args != nil || p.Args != nil && mech == "ebpf" {
					present["parent.args"]++
					if !slices.Equal(par.Args, s.argv) {
						t.Errorf("%s: its sleep's process.parent.args %q, want the shell's %q", s.argv[3], par.Args, s.argv)
					}
				}
				if par.Cwd != "" || mech == "ebpf" {
					present["parent.cwd"]++
					if par.Cwd != s.dir {
						t.Errorf("%s: its sleep's process.parent.working_directory %q, want %q", s.argv[3], par.Cwd, s.dir)
					}
				}
				if par.User != nil || mech == "ebpf" {
					present["parent.user"]++
					if par.User == nil || par.User.ID != uid(s) {
						t.Errorf("%s: its sleep's process.parent.user %+v, want %s", s.argv[3], par.User, uid(s))
					}
				}
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
