package main

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// psToken reads pid's one-second token the way the ps fallback sees it.
func psToken(t *testing.T, pid int) string {
	t.Helper()
	snap, err := fallback.NewPS(fallback.PSOptions{}).Snapshot(context.Background())
	if err != nil {
		t.Fatalf("ps snapshot: %v", err)
	}
	e := snap.Lookup(int32(pid))
	if e == nil || e.Token.IsZero() {
		t.Fatalf("ps snapshot has no token for %d", pid)
	}
	return e.Token.String()
}

// TestIntegrationPollingMechanismsForced runs verify and kill with the
// polling mechanisms forced: they answer as the kernel mechanisms do where
// identity is provable, and never OWNED for a reissued pid.
func TestIntegrationPollingMechanismsForced(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"proc", "ps"} {
		t.Run(mech, func(t *testing.T) {
			cmd := testenv.Start(t, "sleep", "60")
			pid := strconv.Itoa(cmd.Process.Pid)
			tok := tokenOf(t, cmd.Process.Pid)
			code, out, errs := cli(t, "verify", pid, tok, "--mechanism", mech, "--json")
			if code != 0 || !strings.Contains(out, `"mechanism":"local:`+mech+`"`) {
				t.Fatalf("verify --mechanism %s = %d %s %s, want OWNED naming %s", mech, code, out, errs, mech)
			}
			code, out, _ = cli(t, "kill", pid, tok, "--mechanism", mech, "--grace", "2s")
			if code != 0 {
				t.Fatalf("kill --mechanism %s = %d %s, want 0", mech, code, out)
			}
			cmd.Wait()
			if code, _, _ := cli(t, "verify", pid, tok, "--mechanism", mech); code != 2 {
				t.Errorf("verify after kill = %d, want 2 GONE", code)
			}

			// A reissued pid: FOREIGN, the stranger untouched.
			for attempt := 0; attempt < 20; attempt++ {
				c := exec.Command("sleep", "60")
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				old := tokenOf(t, c.Process.Pid)
				c.Process.Kill()
				c.Wait()
				s, err := testenv.Reissue(t, int32(c.Process.Pid))
				if err != nil {
					continue
				}
				p := strconv.Itoa(c.Process.Pid)
				if code, out, _ := cli(t, "verify", p, old, "--mechanism", mech); code != 1 {
					t.Errorf("verify(reissued) --mechanism %s = %d %q, want 1 FOREIGN", mech, code, out)
				}
				stok := tokenOf(t, c.Process.Pid)
				if code, _, _ := cli(t, "kill", p, old, "--mechanism", mech, "--grace", "100ms"); code != 1 {
					t.Errorf("kill(reissued) --mechanism %s = %d, want 1", mech, code)
				}
				if code, _, _ := cli(t, "verify", p, stok); code != 0 {
					t.Fatal("the stranger at the reissued pid did not survive")
				}
				s.Stop()
				return
			}
			t.Fatal("could not reissue a pid")
		})
	}
}

// TestIntegrationSameSecondReissueOneSecondToken: a claim made with ps's
// one-second token cannot tell a reissue within that second from the
// original: UNVERIFIABLE, never OWNED. A reissue seconds later is FOREIGN.
func TestIntegrationSameSecondReissueOneSecondToken(t *testing.T) {
	testenv.RequireRoot(t)
	for attempt := 0; attempt < 20; attempt++ {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		claim := psToken(t, c.Process.Pid)
		started := time.Now()
		c.Process.Kill()
		c.Wait()
		s, err := testenv.Reissue(t, int32(c.Process.Pid))
		if err != nil {
			continue
		}
		p := strconv.Itoa(c.Process.Pid)
		if time.Since(started) > 900*time.Millisecond {
			s.Stop()
			continue // not within one second: try again
		}
		code, out, _ := cli(t, "verify", p, claim, "--mechanism", "ps")
		if code != 3 {
			t.Errorf("verify(same-second reissue, one-second token) = %d %q, want 3 UNVERIFIABLE", code, out)
		}
		if code, _, _ := cli(t, "kill", p, claim, "--mechanism", "ps", "--grace", "100ms"); code != 1 {
			t.Errorf("kill(same-second reissue) = %d, want 1: nothing signalled", code)
		}
		s.Stop()
		// The same claim against a stranger started three seconds later.
		time.Sleep(3 * time.Second)
		s2, err := testenv.Reissue(t, int32(c.Process.Pid))
		if err != nil {
			t.Logf("pid %s taken meanwhile: another attempt, for the later reissue", p)
			continue
		}
		if code, out, _ := cli(t, "verify", p, claim, "--mechanism", "ps"); code != 1 {
			t.Errorf("verify(reissue 3 s later, one-second token) = %d %q, want 1 FOREIGN", code, out)
		}
		s2.Stop()
		return
	}
	t.Fatal("no same-second reissue followed by a later one in 20 attempts")
}
