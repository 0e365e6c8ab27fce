package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestIntegrationOneJudge asks the same question two ways, through the
// daemon and locally, for every kind of claim: the verdict and the exit code
// must be the same (they come from one judge, tracker.NewJudge). Before
// there was one judge, the daemon's lacked the cross-precision compare and
// called a seconds claim 100 s off UNVERIFIABLE where the CLI said FOREIGN.
func TestIntegrationOneJudge(t *testing.T) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	btime, err := procfs.ReadBootTime("/proc")
	if err != nil {
		t.Fatal(err)
	}
	// Every process is born before the daemon starts, so both sides know
	// it from the same kind of scan.
	live := exec.Command("sleep", "120")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	lpid := live.Process.Pid
	ltok, err := token.Parse(tokenOf(t, lpid))
	if err != nil {
		t.Fatal(err)
	}
	zombie := exec.Command("sh", "-c", "exit 3")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zombie.Wait() })
	ztok := zombieToken(t, zombie.Process.Pid, boot)

	// A pid reissued to a stranger.
	var rpid int
	var rtok string
	for attempt := 0; attempt < 20 && rtok == ""; attempt++ {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		rpid, rtok = c.Process.Pid, tokenOf(t, c.Process.Pid)
		c.Process.Kill()
		c.Wait()
		s, err := testenv.Reissue(t, int32(rpid))
		if err != nil {
			rtok = ""
			continue
		}
		t.Cleanup(s.Stop)
	}
	if rtok == "" {
		t.Fatal("could not reissue a pid")
	}

	startMicros := btime*1e6 + int64(ltok.Start)*1e4
	other := boot
	other[0] ^= 0xff
	tid := threadOf(t)
	claims := []struct {
		name string
		pid  int
		tok  string
	}{
		{"ticks and inode", lpid, ltok.String()},
		{"ticks only", lpid, token.Token{Boot: boot, Start: ltok.Start, Prec: token.Ticks}.String()},
		{"microseconds", lpid, token.Token{Boot: boot, Start: uint64(startMicros), Prec: token.Micro}.String()},
		{"seconds", lpid, token.Token{Boot: boot, Start: uint64(startMicros / 1e6), Prec: token.Second}.String()},
		{"seconds, 100 s off", lpid, token.Token{Boot: boot, Start: uint64(startMicros/1e6 - 100), Prec: token.Second}.String()},
		{"another boot", lpid, token.Token{Boot: other, Start: ltok.Start, Ino: ltok.Ino, Prec: token.Ticks}.String()},
		{"malformed", lpid, "v1:t:not-a-token"},
		{"reissued", rpid, rtok},
		{"zombie", zombie.Process.Pid, ztok},
		{"thread id", tid, ltok.String()},
	}

	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--mechanism", "proc")
	for _, c := range claims {
		dcode, dout, derr := d.run(t, nil, "verify", strconv.Itoa(c.pid), c.tok)
		lcode, lout, lerr := d.run(t, nil, "verify", strconv.Itoa(c.pid), c.tok, "--mechanism", "proc")
		if dcode != lcode || verdictWord(dout) != verdictWord(lout) {
			t.Errorf("%s: verify %d %s: daemon %d %q (%s), local %d %q (%s); want the same answer",
				c.name, c.pid, c.tok, dcode, strings.TrimSpace(dout), strings.TrimSpace(derr), lcode, strings.TrimSpace(lout), strings.TrimSpace(lerr))
		}
	}
	// The case that disagreed: FOREIGN both ways.
	if code, out, _ := d.run(t, nil, "verify", strconv.Itoa(lpid), claims[4].tok); code != client.ExitForeign {
		t.Errorf("verify of a seconds claim 100 s off through the daemon = %d %q, want %d FOREIGN", code, out, client.ExitForeign)
	}
}

// zombieToken waits for pid to be a zombie and returns its ticks token.
func zombieToken(t *testing.T, pid int, boot procfs.BootID) string {
	t.Helper()
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	testenv.Eventually(t, 10*time.Second, func() bool { return r.ReadStat(int32(pid), &st) == nil && st.Zombie() },
		"pid %d did not become a zombie", pid)
	return token.Token{Boot: boot, Start: st.StartTime, Prec: token.Ticks}.String()
}

// threadOf returns the id of a thread of this process that is not its
// leader.
func threadOf(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil && id != syscall.Getpid() {
			return id
		}
	}
	t.Fatal("no thread besides the leader")
	return 0
}
