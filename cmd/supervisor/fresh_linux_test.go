package main

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestIntegrationReleaseFreshDoubleFork: an admitted process double-forks
// (the middle process exits, so the grandchild is nobody's child) and the
// release is asked the moment the fork returned. The eBPF programs hand
// most records to the daemon's reader at its next poll, tens of
// milliseconds later, and only the graph knows the grandchild as a
// member: the daemon must bring the graph up to date before it acts
// (tracker.Sync), or the grandchild escapes the teardown of a claim
// reported released with nothing left. Several rounds, so that a graph
// that is not brought up to date is seen behind at least once. With
// eBPF and with netlink, without a cgroup (which would find the
// grandchild on its own).
func TestIntegrationReleaseFreshDoubleFork(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			state, sock := newDirs(t)
			d := startDaemon(t, state, sock, "--mechanism", mech, "--cgroup", "off")
			for round := range 6 {
				root, grandchild := startDoubleForker(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				c, err := d.client.Admit(ctx, &api.AdmitRequest{Pid: root, Token: mustToken(t, root)})
				if err != nil {
					cancel()
					t.Fatalf("round %d: admit %d: %v", round, root, err)
				}
				g := grandchild() // forked, and its parent gone: release now
				grace := api.Duration(time.Second)
				res, err := d.client.Release(ctx, c.ID, &api.ReleaseRequest{Grace: &grace})
				cancel()
				if err != nil {
					t.Fatalf("round %d: release %s: %v", round, c.ID, err)
				}
				out := res.Outcome
				if out == nil || !slices.ContainsFunc(out.Targeted, func(m actions.Member) bool { return m.Pid == g }) {
					t.Errorf("round %d: release of %d (outcome %+v) did not target its grandchild %d, forked before the request", round, root, out, g)
				}
				testenv.Eventually(t, 10*time.Second, func() bool { return !alivePid(g) },
					"round %d: grandchild %d of released claim %s still alive", round, g, c.ID)
			}
		})
	}
}

// startDoubleForker starts a shell that, once admitted, forks a child
// that forks a sleeping grandchild and exits. grandchild tells the shell
// to go and returns the grandchild's pid once its parent has exited.
func startDoubleForker(t *testing.T) (root int32, grandchild func() int32) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `read go; (sleep 1000 & echo $!); echo forked; exec sleep 1000`)
	cmd.Dir = "/"
	stdin, stdout := testenv.StartPiped(t, cmd)
	var g int32
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if g > 0 {
			syscall.Kill(int(g), syscall.SIGKILL)
		}
	})
	lines := bufio.NewScanner(stdout)
	return int32(cmd.Process.Pid), func() int32 {
		t.Helper()
		if _, err := io.WriteString(stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			if line == "forked" {
				if g == 0 {
					t.Fatal("the shell said forked before the grandchild's pid")
				}
				return g
			}
			n, err := strconv.Atoi(line)
			if err != nil {
				t.Fatalf("unexpected line %q from the double-forking shell", line)
			}
			g = int32(n)
		}
		t.Fatalf("the double-forking shell ended: %v", lines.Err())
		return 0
	}
}

// mustToken returns the start token of the live process pid.
func mustToken(t *testing.T, pid int32) token.Token {
	t.Helper()
	tok, err := token.Parse(tokenOf(t, int(pid)))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
