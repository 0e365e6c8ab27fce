package verdict

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

func newJudge(t *testing.T) *Judge {
	t.Helper()
	j, err := New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return j
}

func tokenOf(t *testing.T, j *Judge, pid int) token.Token {
	t.Helper()
	h, err := pidfd.Open(int32(pid), j.Boot)
	if err != nil {
		t.Fatalf("pidfd.Open(%d) = %v", pid, err)
	}
	defer h.Close()
	return h.Token()
}

// reaped starts a short-lived child, records its token, and reaps it.
func reaped(t *testing.T, j *Judge) (int32, token.Token) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tok := tokenOf(t, j, cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	return int32(cmd.Process.Pid), tok
}

func TestIntegrationOwnedAndGone(t *testing.T) {
	j := newJudge(t)
	cmd := testenv.Start(t, "sleep", "60")
	tok := tokenOf(t, j, cmd.Process.Pid)
	if tok.Ino == 0 {
		testenv.Skip(t, "kernel has no pidfs inode ids")
	}
	v := j.Judge(int32(cmd.Process.Pid), tok)
	if v.Result != Owned || v.Mechanism == "" || v.Reason == "" {
		t.Fatalf("Judge(live child) = %+v, want OWNED with reason and mechanism", v)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if v := j.Judge(int32(cmd.Process.Pid), tok); v.Result != Gone {
		t.Errorf("Judge(reaped child) = %+v, want GONE", v)
	}
}

func TestIntegrationForcedReuseIsForeign(t *testing.T) {
	testenv.RequireRoot(t)
	j := newJudge(t)
	for attempt := 0; attempt < 20; attempt++ {
		pid, tok := reaped(t, j)
		s, err := testenv.Reissue(t, pid)
		if err != nil {
			continue
		}
		v := j.Judge(pid, tok)
		if v.Result != Foreign {
			t.Fatalf("Judge(reissued pid %d) = %+v, want FOREIGN", pid, v)
		}
		if v.Observed.IsZero() || v.Observed == tok {
			t.Errorf("Observed = %q, want the stranger's token", v.Observed)
		}
		s.Stop()
		return
	}
	t.Fatal("could not reissue a pid in 20 attempts")
}

// TestIntegrationSameTickReuse recreates a pid inside the clock tick in which
// its previous holder started, so start times are equal and only the pidfs
// inode tells the instances apart.
func TestIntegrationSameTickReuse(t *testing.T) {
	testenv.RequireRoot(t)
	j := newJudge(t)
	for attempt := 0; attempt < 200; attempt++ {
		ticks, ino, second, err := testenv.SameTick(t, testenv.FreePid(t))
		if err != nil {
			continue
		}
		if ino == 0 {
			testenv.Skip(t, "kernel has no pidfs inode ids")
		}
		tok := token.Token{Boot: j.Boot, Start: ticks, Ino: ino, Prec: token.Ticks}
		now := tokenOf(t, j, int(second.Pid))
		if now.Start != tok.Start {
			second.Stop()
			continue
		}
		v := j.Judge(second.Pid, tok)
		if v.Result == Owned {
			t.Fatalf("Judge(same-tick reissue) = %+v: a stranger judged OWNED", v)
		}
		if v.Result != Foreign || !strings.Contains(v.Reason, "inode") {
			t.Errorf("Judge(same-tick reissue) = %+v, want FOREIGN by pidfs inode", v)
		}
		// A ticks-only claim cannot tell the two apart: it must not be OWNED.
		coarse := tok
		coarse.Ino = 0
		if v := j.Judge(second.Pid, coarse); v.Result != Unverifiable {
			t.Errorf("Judge(ticks-only claim, same-tick reissue) = %+v, want UNVERIFIABLE", v)
		}
		second.Stop()
		return
	}
	t.Fatal("no same-tick reissue in 200 attempts")
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

func TestIntegrationEdgeCases(t *testing.T) {
	j := newJudge(t)
	self := tokenOf(t, j, os.Getpid())
	otherBoot := self
	otherBoot.Boot = procfs.BootID{0xde, 0xad}

	// A zombie: a child that exited and has not been reaped.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	ztok := tokenOf(t, j, zombie.Process.Pid)
	waitZombie(t, zombie.Process.Pid)
	t.Cleanup(func() { zombie.Wait() })

	// A thread of this process that is not its leader (the Go runtime always
	// runs several).
	thread := 0
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, e := range tasks {
		if n, _ := strconv.Atoi(e.Name()); n != 0 && n != os.Getpid() {
			thread = n
		}
	}
	if thread == 0 {
		t.Fatal("no thread other than the leader in /proc/self/task")
	}

	tests := []struct {
		name  string
		pid   int32
		claim token.Token
		want  Result
		why   string
	}{
		{"no token", int32(os.Getpid()), token.Token{}, Unverifiable, "no token"},
		{"other boot, pid live", int32(os.Getpid()), otherBoot, Foreign, "another boot"},
		{"other boot, pid free", 1<<22 - 1, otherBoot, Gone, "another boot"},
		{"pid 0", 0, self, Unverifiable, "not a valid"},
		{"negative pid", -5, self, Unverifiable, "not a valid"},
		{"huge pid", 1 << 30, self, Unverifiable, "not a valid"},
		{"pid 1 with our token", 1, self, Foreign, "start time differs"},
		{"zombie", int32(zombie.Process.Pid), ztok, Gone, "zombie"},
		{"thread id", int32(thread), self, Foreign, "thread"},
	}
	for _, tt := range tests {
		v := j.Judge(tt.pid, tt.claim)
		if v.Result != tt.want || !strings.Contains(v.Reason, tt.why) {
			t.Errorf("%s: Judge(%d, %q) = %v, want %v (reason mentioning %q)", tt.name, tt.pid, tt.claim, v, tt.want, tt.why)
		}
		if v.Result == Owned {
			t.Errorf("%s: judged OWNED", tt.name)
		}
	}
	// pid 1 judged against its own token is provably itself.
	if v := j.Judge(1, tokenOf(t, j, 1)); v.Result != Owned {
		t.Errorf("Judge(1, token of 1) = %v, want OWNED", v)
	}
}

func waitZombie(t *testing.T, pid int) {
	t.Helper()
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	testenv.Eventually(t, 5*time.Second, func() bool { return r.ReadStat(int32(pid), &st) == nil && st.Zombie() },
		"pid %d never became a zombie", pid)
}

// fakeObserver answers for one claim.
type fakeObserver struct{ o Observation }

func (f fakeObserver) Observe(int32, token.Token) Observation { return f.o }

func TestIntegrationObserverProvesTicksOnlyClaim(t *testing.T) {
	j := newJudge(t)
	cmd := testenv.Start(t, "sleep", "60")
	tok := tokenOf(t, j, cmd.Process.Pid)
	tok.Ino = 0
	pid := int32(cmd.Process.Pid)
	if v := j.Judge(pid, tok); v.Result != Unverifiable {
		t.Fatalf("Judge(ticks-only, no observer) = %v, want UNVERIFIABLE", v)
	}
	j.Observer = fakeObserver{Observation{Known: true, Continuous: true, Mechanism: "ebpf"}}
	if v := j.Judge(pid, tok); v.Result != Owned || v.Mechanism != "ebpf" {
		t.Errorf("Judge(ticks-only, continuous watch) = %v, want OWNED by ebpf", v)
	}
	j.Observer = fakeObserver{Observation{Known: true, Continuous: false, Mechanism: "netlink"}}
	if v := j.Judge(pid, tok); v.Result != Unverifiable {
		t.Errorf("Judge(ticks-only, watch crossed a loss) = %v, want UNVERIFIABLE", v)
	}
	j.Observer = fakeObserver{Observation{Known: true, Exited: true, ExitedAt: time.Now(), Mechanism: "ebpf"}}
	if v := j.Judge(pid, tok); v.Result != Foreign || !strings.Contains(v.Reason, "reissued") {
		t.Errorf("Judge(ticks-only, exit observed) = %v, want FOREIGN naming the reissue", v)
	}
}

// benchTarget starts a single-threaded child to judge, like the processes
// a supervisor launches.
func benchTarget(b *testing.B) int32 {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return int32(cmd.Process.Pid)
}

func BenchmarkJudgeLive(b *testing.B) {
	j, err := New()
	if err != nil {
		b.Fatal(err)
	}
	pid := benchTarget(b)
	h, err := pidfd.Open(pid, j.Boot)
	if err != nil {
		b.Fatal(err)
	}
	claim := h.Token()
	h.Close()
	b.ReportAllocs()
	for b.Loop() {
		if v := j.Judge(pid, claim); v.Result != Owned {
			b.Fatal(v)
		}
	}
}

// BenchmarkPSCheck is the check the seeds' applications make: a ps
// subprocess asked for the start time of one pid.
func BenchmarkPSCheck(b *testing.B) {
	pid := itoa(benchTarget(b))
	for b.Loop() {
		out, err := exec.Command("ps", "-o", "lstart=", "-p", pid).Output()
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadToken(b *testing.B) {
	boot, _ := procfs.ReadBootID("/proc")
	pid := benchTarget(b)
	b.ReportAllocs()
	for b.Loop() {
		h, err := pidfd.Open(pid, boot)
		if err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}

// TestIntegrationGoneReasonSaysHowItWasKnown: a GONE verdict says the exit
// was observed only when an event said so; a poller that found the pid
// missing from a snapshot inferred it, and the reason says that instead.
func TestIntegrationGoneReasonSaysHowItWasKnown(t *testing.T) {
	j := newJudge(t)
	cmd := testenv.Start(t, "sleep", "60")
	tok := tokenOf(t, j, cmd.Process.Pid)
	pid := int32(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	for _, tc := range []struct {
		o    Observation
		want string
	}{
		{Observation{Known: true, Exited: true, ExitedAt: time.Now(), Mechanism: "ebpf"}, "exit observed at"},
		{Observation{Known: true, Exited: true, ExitInferred: true, ExitedAt: time.Now(), Mechanism: "proc"}, "found gone by"},
	} {
		j.Observer = fakeObserver{tc.o}
		if v := j.Judge(pid, tok); v.Result != Gone || !strings.HasPrefix(v.Reason, tc.want) || v.Mechanism != tc.o.Mechanism {
			t.Errorf("Judge(gone, %+v) = %v, want GONE by %s: %q...", tc.o, v, tc.o.Mechanism, tc.want)
		}
	}
}

// TestIntegrationZombieLeaderLives: a process whose main thread exited
// while another thread runs shows Z in /proc/PID/stat, and is alive: it
// is OWNED, and a bound handle neither calls it a zombie nor exited, until
// it is killed. Before, it was judged GONE: a grant of it was "released"
// with nothing signalled, and a job's exit recorded while it ran on.
func TestIntegrationZombieLeaderLives(t *testing.T) {
	j := newJudge(t)
	cmd := testenv.ZombieLeader(t)
	pid := int32(cmd.Process.Pid)
	tok := tokenOf(t, j, cmd.Process.Pid)
	if v := j.Judge(pid, tok); v.Result != Owned {
		t.Fatalf("Judge(a process whose leader thread exited) = %+v, want OWNED", v)
	}
	v, h := j.Bind(pid, tok)
	if h == nil {
		t.Fatalf("Bind = %+v, no handle", v)
	}
	defer h.Close()
	if h.Zombie() || h.Exited() {
		t.Errorf("bound handle: zombie %v, exited %v; want it alive", h.Zombie(), h.Exited())
	}
	cmd.Process.Kill()
	if !h.Wait(10 * time.Second) {
		t.Fatal("the killed process never exited")
	}
	if v := j.Judge(pid, tok); v.Result != Gone {
		t.Errorf("Judge after the kill = %+v, want GONE", v)
	}
}
