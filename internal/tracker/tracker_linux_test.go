package tracker

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func start(t *testing.T, mech string) (*Tracker, procfs.BootID) {
	t.Helper()
	return startGraph(t, mech, lineage.Config{})
}

// startGraph is start with the graph's config.
func startGraph(t *testing.T, mech string, cfg lineage.Config) (*Tracker, procfs.BootID) {
	t.Helper()
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, Graph: cfg})
	if err != nil {
		testenv.Skip(t, "mechanism %s: %v", mech, err)
	}
	t.Cleanup(func() { tr.Close() })
	if got := string(tr.Mechanism()); got != mech {
		t.Fatalf("Mechanism() = %q, want %q", got, mech)
	}
	return tr, boot
}

func tokenOf(t *testing.T, boot procfs.BootID, pid int32) token.Token {
	t.Helper()
	h, err := pidfd.Open(pid, boot)
	if err != nil {
		t.Fatalf("pidfd.Open(%d) = %v", pid, err)
	}
	defer h.Close()
	return h.Token()
}

var kernelMechanisms = []string{"ebpf", "netlink"}

// TestIntegrationOrphanedGrandchildIsTornDown: root forks a middle process
// that forks a grandchild (setsid) and exits, so the kernel reparents the
// grandchild. Observed lineage still ties it to root, and teardown reaches it.
// The middle process lives until the graph holds the grandchild: the netlink
// connector reads a child's start time from /proc and trusts it only while
// the parent link still holds. It exits when the test closes its stdin.
func TestIntegrationOrphanedGrandchildIsTornDown(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			tr, boot := start(t, mech)
			cmd := exec.Command("sh", "-c", `sh -c 'setsid sleep 60 & echo $!; read x' ; exec sleep 60`)
			out, _ := cmd.StdoutPipe()
			release, _ := cmd.StdinPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(strings.TrimSpace(line))
			grandchild := int32(n)
			root := int32(cmd.Process.Pid)
			gtok := tokenOf(t, boot, grandchild)
			t.Cleanup(func() { syscall.Kill(int(grandchild), syscall.SIGKILL) })
			// Wait until the graph saw the grandchild's birth, then let the
			// middle process exit (its parent is no longer root's child).
			testenv.Eventually(t, 10*time.Second, func() bool {
				d, err := tr.Graph().Descendants(root, tokenOf(t, boot, root))
				return err == nil && slices.ContainsFunc(d, func(n lineage.Node) bool { return n.Pid == grandchild })
			}, "never: grandchild in root's observed lineage")
			release.Close()
			var st procfs.Stat
			testenv.Eventually(t, 10*time.Second, func() bool {
				return procfs.NewReader("/proc").ReadStat(grandchild, &st) == nil && st.PPid != root
			}, "never: grandchild reparented")
			j := &verdict.Judge{Boot: boot, Observer: tr, Mechanism: mech}
			td := actions.New(j, tr.Finder(j), actions.Options{Grace: 2 * time.Second})
			o := td.Run(context.Background(), root, tokenOf(t, boot, root))
			if !o.Dead || !slices.ContainsFunc(o.Targeted, func(m actions.Member) bool { return m.Pid == grandchild }) {
				t.Fatalf("Run = %+v, want the reparented grandchild %d targeted and dead", o, grandchild)
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				return j.Judge(grandchild, gtok).Result != verdict.Owned
			}, "never: grandchild gone")
		})
	}
}

// TestIntegrationReissueObserved forces a pid to be reissued while the
// tracker watches: the graph holds a new generation, and a ticks-only claim
// on the old one is FOREIGN with the observed reissue as its reason.
func TestIntegrationReissueObserved(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			tr, boot := start(t, mech)
			for attempt := 0; attempt < 20; attempt++ {
				cmd := exec.Command("sleep", "60")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				pid := int32(cmd.Process.Pid)
				old := tokenOf(t, boot, pid)
				testenv.Eventually(t, 10*time.Second, func() bool {
					n, ok := tr.Graph().Live(pid)
					return ok && n.Token.Start == old.Start
				}, "never: fork observed")
				cmd.Process.Kill()
				cmd.Wait()
				s, err := testenv.Reissue(t, pid)
				if err != nil {
					continue
				}
				now := tokenOf(t, boot, pid)
				testenv.Eventually(t, 10*time.Second, func() bool {
					n, ok := tr.Graph().Live(pid)
					return ok && n.Token.Start == now.Start && (n.Token.Ino == 0 || n.Token.Ino == now.Ino)
				}, "never: new generation in the graph")
				j := &verdict.Judge{Boot: boot, Observer: tr, Mechanism: mech}
				if v := j.Judge(pid, old); v.Result != verdict.Foreign {
					t.Fatalf("Judge(old generation, full token) = %v, want FOREIGN", v)
				}
				coarse := old
				coarse.Ino = 0
				v := j.Judge(pid, coarse)
				switch {
				case old.Start == now.Start:
					// Both generations started in one tick: a ticks-only
					// claim names either, and must not be OWNED.
					if v.Result != verdict.Unverifiable {
						t.Fatalf("Judge(ticks-only claim, same-tick reissue) = %v, want UNVERIFIABLE", v)
					}
				case v.Result != verdict.Foreign || v.Mechanism != mech || !strings.Contains(v.Reason, "reissued"):
					t.Fatalf("Judge(ticks-only claim on the old generation) = %v, want FOREIGN by %s naming the observed reissue", v, mech)
				}
				s.Stop()
				return
			}
			t.Fatal("could not reissue a pid")
		})
	}
}

func TestIntegrationForcedMechanismErrors(t *testing.T) {
	boot, _ := procfs.ReadBootID("/proc")
	if _, err := Start(context.Background(), Options{Mechanism: "carrier-pigeon", Boot: boot}); err == nil {
		t.Fatal("Start(unknown mechanism) succeeded")
	}
}

// TestIntegrationBornBetweenAttachAndScan starts a process after the source
// is attached and before /proc is scanned: the scan and the event stream
// both see it, and the graph holds it once, with the birth the event saw.
func TestIntegrationBornBetweenAttachAndScan(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			testenv.RequireRoot(t)
			boot, _ := procfs.ReadBootID("/proc")
			var child *exec.Cmd
			tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, afterAttach: func() {
				child = exec.Command("sleep", "60")
				if err := child.Start(); err != nil {
					t.Fatal(err)
				}
			}})
			if err != nil {
				testenv.Skip(t, "mechanism %s: %v", mech, err)
			}
			defer tr.Close()
			t.Cleanup(func() { child.Process.Kill(); child.Wait() })
			pid := int32(child.Process.Pid)
			tok := tokenOf(t, boot, pid)
			n, ok := tr.Graph().Live(pid)
			if !ok || n.Token.Start != tok.Start {
				t.Fatalf("Live(%d) = %+v, %v: the scan missed a process born after attach", pid, n, ok)
			}
			// The fork event drains as a duplicate of the scanned node,
			// which then knows its birth was observed.
			testenv.Eventually(t, 10*time.Second, func() bool {
				n, _ := tr.Graph().Live(pid)
				return n.Flags.Has(lineage.BornObserved)
			}, "never: the fork event applied to the scanned node")
			// Exactly one live node at the pid, one generation.
			w, ok := tr.Graph().Watch(pid, tok)
			if !ok || w.Predecessor != nil || w.Ambiguous {
				t.Errorf("Watch = %+v, %v: want one generation, seen once", w, ok)
			}
			if d, err := tr.Graph().Descendants(int32(os.Getpid()), tokenOf(t, boot, int32(os.Getpid()))); err != nil ||
				count(d, pid) != 1 {
				t.Errorf("Descendants(self) holds pid %d %d times (%v), want once", pid, count(d, pid), err)
			}
		})
	}
}

func count(ns []lineage.Node, pid int32) int {
	c := 0
	for _, n := range ns {
		if n.Pid == pid {
			c++
		}
	}
	return c
}

// Cancelling the context stops a netlink tracker promptly even when the
// kernel sends nothing more: the stop never waits for a process event.
func TestIntegrationNetlinkStopsOnCancel(t *testing.T) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := Start(ctx, Options{Mechanism: "netlink", Boot: boot})
	if err != nil {
		testenv.Skip(t, "mechanism netlink: %v", err)
	}
	cancel()
	select {
	case <-tr.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("tracker still draining 10 s after its context ended")
	}
	if err := tr.Err(); err != nil {
		t.Errorf("Err() = %v, want nil after a cancel", err)
	}
}

// startPiped starts c with a pipe to its standard input and one from its

// TestIntegrationObserveExitInferred: the kernel mechanisms saw the exit
// (its event); the /proc poller found the pid missing from a snapshot,
// and says the exit was inferred.
func TestIntegrationObserveExitInferred(t *testing.T) {
	for _, tc := range []struct {
		mech     string
		inferred bool
	}{{"ebpf", false}, {"netlink", false}, {"proc", true}} {
		t.Run(tc.mech, func(t *testing.T) {
			tr, boot := start(t, tc.mech)
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := int32(cmd.Process.Pid)
			tok := tokenOf(t, boot, pid)
			testenv.Eventually(t, 10*time.Second, func() bool { return tr.Observe(pid, tok).Known }, "never: %d in the graph", pid)
			cmd.Process.Kill()
			cmd.Wait()
			var o verdict.Observation
			testenv.Eventually(t, 10*time.Second, func() bool { o = tr.Observe(pid, tok); return o.Exited }, "never: %d's exit", pid)
			if o.ExitInferred != tc.inferred {
				t.Errorf("Observe after the exit = %+v, want ExitInferred %v", o, tc.inferred)
			}
		})
	}
}
