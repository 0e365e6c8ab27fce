package store

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash test re-executes the test binary as a writer (TestMain sees
// crashEnv) that runs a burst of Put, Update, AddMember and Delete on a
// store and reports each operation on stdout after it returned. The test
// kills it with SIGKILL at a random moment, then reopens the store and
// checks it against what was reported.
const (
	crashEnv       = "STORE_CRASH_WRITER" // path of the store, in the child
	crashRoundsEnv = "STORE_CRASH_ROUNDS" // rounds to run (default 100; 50 under -race, 20 with -short)
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		crashWriter(path)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashWriter writes until it is killed. Lines: "P id owner", "U id rev",
// "M id pid", "D id", each printed after the operation returned, and
// "d id" before a Delete.
func crashWriter(path string) {
	fail := func(err error) {
		fmt.Printf("E %v\n", err)
		os.Exit(2)
	}
	s, err := Open(path, Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fail(err)
	}
	all, err := s.List(Filter{})
	if err != nil {
		fail(err)
	}
	var live []string
	for _, c := range all {
		live = append(live, c.ID)
	}
	say := func(format string, args ...any) {
		// One write(2) per line, unbuffered: what the parent reads was
		// reported before the kill.
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	say("READY")
	round := os.Getenv("STORE_CRASH_ROUND")
	for i := 0; ; i++ {
		r := rand.IntN(100)
		switch {
		case len(live) > 0 && r < 15:
			j := rand.IntN(len(live))
			id := live[j]
			say("d %s", id) // intent: a kill before "D" leaves either outcome
			if err := s.Delete(id); err != nil {
				fail(err)
			}
			live = append(live[:j], live[j+1:]...)
			say("D %s", id)
		case len(live) > 0 && r < 40:
			id := live[rand.IntN(len(live))]
			var rev uint64
			err := s.Update(id, func(c *Claim) error {
				c.ExitSignal++
				c.State = []State{Running, Survivors, Exited, Retired}[rand.IntN(4)]
				c.Argv = append(c.Argv, strings.Repeat("u", rand.IntN(300)))
				if len(c.Argv) > 20 {
					c.Argv = c.Argv[10:]
				}
				rev = c.Rev + 1
				return nil
			})
			if err != nil {
				fail(err)
			}
			say("U %s %d", id, rev)
		case len(live) > 0 && r < 60:
			id := live[rand.IntN(len(live))]
			pid := int32(rand.IntN(1 << 22))
			if _, err := s.AddMember(id, Member{Pid: pid, Token: tk("tok"), Parent: 1}); err != nil {
				fail(err)
			}
			say("M %s %d", id, pid)
		default:
			c := Claim{
				Kind:  []Kind{Grant, Job}[rand.IntN(2)],
				Owner: fmt.Sprintf("round-%s-op-%d", round, i),
				Argv:  []string{"/bin/true", strings.Repeat("a", rand.IntN(2000))},
				Pid:   int32(rand.IntN(1 << 22)),
				Token: tk("root"),
			}
			if err := s.Put(&c); err != nil {
				fail(err)
			}
			live = append(live, c.ID)
			say("P %s %s", c.ID, c.Owner)
		}
	}
}

type expect struct {
	present bool
	dying   bool // a Delete was started; its outcome may be unreported
	owner   string
	minRev  uint64
	members map[int32]bool
}

func crashRounds(t *testing.T) int {
	if v := os.Getenv(crashRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q is not a positive number", crashRoundsEnv, v)
		}
		return n
	}
	switch {
	case testing.Short():
		return 20
	case raceEnabled:
		return 50 // the kills test the file, not the goroutines: keep the run short
	}
	return 100
}

func TestCrashSafety(t *testing.T) {
	rounds := crashRounds(t)
	path := filepath.Join(t.TempDir(), "state.db")
	want := map[string]*expect{}
	ops := 0
	for round := range rounds {
		lines := runAndKill(t, path, round, time.Duration(rand.IntN(15000))*time.Microsecond)
		for _, l := range lines {
			f := strings.Fields(l)
			ops++
			switch f[0] {
			case "E":
				t.Fatalf("round %d: writer failed: %s", round, l)
			case "P":
				want[f[1]] = &expect{present: true, owner: f[2], minRev: 1, members: map[int32]bool{}}
			case "U":
				rev, _ := strconv.ParseUint(f[2], 10, 64)
				if e := want[f[1]]; e != nil { // nil: put, then killed before reporting it
					e.minRev = rev
				}
			case "M":
				pid, _ := strconv.Atoi(f[2])
				if e := want[f[1]]; e != nil {
					e.members[int32(pid)] = true
				}
			case "d":
				if e := want[f[1]]; e != nil {
					e.dying = true
				}
			case "D":
				if e := want[f[1]]; e != nil {
					e.present = false
				} else {
					want[f[1]] = &expect{}
				}
			default:
				ops--
			}
		}
		verifyAfterCrash(t, round, path, want)
	}
	t.Logf("%d rounds, %d reported operations, %d claims seen", rounds, ops, len(want))
	if ops <= 0 || len(want) == 0 {
		t.Fatalf("the writers reported %d operations on %d claims before their kills: nothing was checked", ops, len(want))
	}
}

// runAndKill starts a writer, lets it run for d after it is ready, kills
// it and returns what it reported.
func runAndKill(t *testing.T, path string, round int, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path, "STORE_CRASH_ROUND="+strconv.Itoa(round))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "READY" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("round %d: writer did not start: %q %v", round, sc.Text(), sc.Err())
	}
	time.Sleep(d)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("round %d: kill: %v", round, err)
	}
	var lines []string
	for sc.Scan() { // the pipe keeps what was written before the kill
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: writer ended with %v, not by SIGKILL (lines %q)", round, err, lines)
	}
	return lines
}

func verifyAfterCrash(t *testing.T, round int, path string, want map[string]*expect) {
	t.Helper()
	s, err := Open(path, Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("round %d: reopen after kill = %v", round, err)
	}
	defer s.Close()
	all, err := s.List(Filter{})
	if err != nil {
		t.Fatalf("round %d: List = %v", round, err)
	}
	got := map[string]Claim{}
	owners := map[string]string{}
	for _, c := range all {
		if prev, dup := owners[c.Owner]; dup {
			t.Fatalf("round %d: claim written by %q stored twice, as %s and %s", round, c.Owner, prev, c.ID)
		}
		owners[c.Owner] = c.ID
		got[c.ID] = c
	}
	for id, e := range want {
		c, ok := got[id]
		switch {
		case !e.present && ok:
			t.Fatalf("round %d: %s was deleted but is present", round, id)
		case !e.present:
		case !ok && e.dying:
			e.present = false
		case !ok:
			t.Fatalf("round %d: %s (%s) was put but is missing", round, id, e.owner)
		case c.Owner != e.owner || c.Rev < e.minRev:
			t.Fatalf("round %d: %s = owner %q rev %d, want %q rev >= %d", round, id, c.Owner, c.Rev, e.owner, e.minRev)
		default:
			have := map[int32]bool{}
			for _, m := range c.Members {
				have[m.Pid] = true
			}
			for pid := range e.members {
				if !have[pid] {
					t.Fatalf("round %d: %s lost member %d", round, id, pid)
				}
			}
		}
	}
}
