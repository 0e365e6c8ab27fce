package main

import (
	"context"
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

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// These tests try the daemon as an unprivileged user (nobody) would, and
// check that it never acts with root's rights for them: it signals nothing
// the user could not signal itself, never the daemon or its ancestors, and
// never a stranger a pid namespace's init adopted.

var asNobody = &syscall.Credential{Uid: nobody, Gid: nobody}

// childrenOf lists the live children of ppid with the given comm.
func childrenOf(ppid int32, comm string) []int32 {
	pids, _ := procfs.Pids("/proc")
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	var out []int32
	for _, pid := range pids {
		if r.ReadStat(pid, &st) == nil && st.PPid == ppid && !st.Zombie() && (comm == "" || st.CommString() == comm) {
			out = append(out, pid)
		}
	}
	return out
}

func uidOf(pid int32) uint32 {
	ids, err := procfs.ReadUIDs("/proc", pid)
	if err != nil {
		return 1<<32 - 1
	}
	return ids.Real
}

func alivePid(pid int32) bool {
	var st procfs.Stat
	return procfs.NewReader("/proc").ReadStat(pid, &st) == nil && !st.Zombie()
}

func release(t *testing.T, d *testDaemon, cred *syscall.Credential, id string) api.ReleaseResponse {
	t.Helper()
	_, out, errs := d.run(t, cred, "release", "--grace", "1s", "--json", id)
	var res api.ReleaseResponse
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("release %s: %q: %v (%s)", id, out, err, errs)
	}
	return res
}

func unprovenHas(res api.ReleaseResponse, pid int32, reason string) bool {
	return res.Outcome != nil && slices.ContainsFunc(res.Outcome.Unproven, func(m actions.Member) bool {
		return m.Pid == pid && strings.Contains(m.Reason, reason)
	})
}

// TestIntegrationSetuidDescendantNotSignalled: nobody's grant has a
// descendant that became root through a setuid program (real, effective
// and saved uid 0, which nobody may not signal). Releasing the grant tears
// the rest of the tree down and reports that descendant, unsignalled.
func TestIntegrationSetuidDescendantNotSignalled(t *testing.T) {
	testenv.RequireRoot(t)
	helper := testenv.SetuidRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	code, out, errs := d.run(t, asNobody, "launch", "--json", "--cwd", "/", "--", "sh", "-c", helper+" hold & sleep 1000 & wait")
	if code != 0 {
		t.Fatalf("launch as nobody: exit %d: %s", code, errs)
	}
	var c api.Claim
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	var root0, sleeper int32
	testenv.Eventually(t, 10*time.Second, func() bool {
		hs, ss := childrenOf(c.Pid, "setuid"), childrenOf(c.Pid, "sleep")
		if len(hs) != 1 || len(ss) != 1 || uidOf(hs[0]) != 0 {
			return false
		}
		root0, sleeper = hs[0], ss[0]
		return true
	}, "the grant's setuid child never became root")
	t.Cleanup(func() { syscall.Kill(int(root0), syscall.SIGKILL) })

	res := release(t, d, asNobody, c.ID)
	if !unprovenHas(res, root0, "belongs to uid 0") {
		t.Errorf("release outcome %+v: want %d reported as belonging to uid 0", res.Outcome, root0)
	}
	if !alivePid(root0) {
		t.Error("the daemon signalled a root process for nobody")
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return !alivePid(sleeper) && !alivePid(c.Pid) },
		"the rest of nobody's tree (%d, %d) was not torn down", c.Pid, sleeper)
	if got := d.claim(t, c.ID); got.State != store.Released {
		t.Errorf("claim state %s, want released (an unsignallable member does not keep it open)", got.State)
	}
}

// TestIntegrationDaemonAncestorsProtected: the daemon is started from a
// shell of nobody's through a setuid wrapper (the shape of `sudo
// supervisor run` from a user shell), so it descends from a process nobody
// may admit. Releasing that claim never signals the daemon or its
// ancestors, and the daemon keeps answering.
func TestIntegrationDaemonAncestorsProtected(t *testing.T) {
	testenv.RequireRoot(t)
	helper := testenv.SetuidRoot(t)
	state, sock := newDirs(t)
	logf := filepath.Join(filepath.Dir(sock), "log.json")
	sh := exec.Command("sh", "-c", fmt.Sprintf("%s exec %s run --state-dir %s --socket %s --socket-group %d --log-output file:%s & wait",
		helper, binary(t), state, sock, nobody, logf))
	sh.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody, Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		sh.Wait()
		removeClaimCgroups(state) // waits a second for the killed daemon's store lock
	})
	d := &testDaemon{t: t, state: state, sock: sock, client: api.NewClient(sock), done: make(chan struct{})}
	var st api.Status
	testenv.EventuallyNil(t, 20*time.Second, func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err = d.client.Status(ctx)
		return err
	}, "the daemon started through the setuid wrapper never answered")
	if ppid := parentOf(int32(st.Pid)); ppid != int32(sh.Process.Pid) {
		t.Fatalf("daemon %d has parent %d, want nobody's shell %d", st.Pid, ppid, sh.Process.Pid)
	}
	shTok := tokenOf(t, sh.Process.Pid)
	code, out, errs := d.run(t, asNobody, "admit", strconv.Itoa(sh.Process.Pid), shTok)
	if code != 0 {
		t.Fatalf("nobody admitting its own shell: exit %d: %s", code, errs)
	}
	var c api.Claim
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := d.run(t, asNobody, "release", "--grace", "1s", c.ID); code != exitNoPerm || !strings.Contains(errs, "ancestor of the supervisor daemon") || !strings.Contains(errs, "systemctl stop") {
		t.Errorf("release of the daemon's ancestor: exit %d %q, want %d: a refusal naming it and how to stop the service", code, errs, exitNoPerm)
	}
	if !alivePid(int32(st.Pid)) || !alivePid(int32(sh.Process.Pid)) {
		t.Fatal("the daemon or its parent was signalled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.client.Status(ctx); err != nil {
		t.Errorf("the daemon stopped answering: %v", err)
	}
	b, _ := os.ReadFile(logf)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"signal_sent"`) && strings.Contains(line, fmt.Sprintf(`"pid":%d,`, st.Pid)) {
			t.Errorf("the daemon signalled itself: %s", line)
		}
	}
	// Root's CLI asked to kill the daemon itself: refused by the daemon;
	// its answer is final (TestIntegrationDaemonNotKilled).
	dtok := tokenOf(t, st.Pid)
	if code, _, errs := d.run(t, nil, "kill", strconv.Itoa(st.Pid), dtok, "--grace", "1s"); code != exitNoPerm {
		t.Errorf("kill of the daemon: exit %d %q, want %d", code, errs, exitNoPerm)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := d.client.Status(ctx2); err != nil || !alivePid(int32(st.Pid)) {
		t.Errorf("after `kill` of the daemon's own pid the daemon stopped answering: %v", err)
	}
	syscall.Kill(st.Pid, syscall.SIGTERM)
}

func parentOf(pid int32) int32 {
	var st procfs.Stat
	if procfs.NewReader("/proc").ReadStat(pid, &st) != nil {
		return 0
	}
	return st.PPid
}

// TestIntegrationNamespaceAdoption: nobody becomes the init (M) of its own
// pid namespace. A root tool enters it and leaves a child there, which the
// kernel reparents to M when the tool exits. Releasing nobody's claim on M
// must not kill that stranger (signalling M would: the kernel kills a
// namespace with its init), so M and the stranger both live and the
// reason is given. A namespace whose processes are all nobody's own proven
// members is torn down. With eBPF and with netlink.
func TestIntegrationNamespaceAdoption(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			state, sock := newDirs(t)
			d := startDaemon(t, state, sock, "--mechanism", mech, "--socket-group", fmt.Sprint(nobody))

			m, mpid := userNamespace(t, "exec sleep 1000")
			tool := exec.Command("nsenter", "--target", strconv.Itoa(int(mpid)), "--pid", "--", "sh", "-c", "sleep 1000 >/dev/null 2>&1 & exit 0")
			if out, err := tool.CombinedOutput(); err != nil {
				t.Fatalf("nsenter: %v: %s", err, out)
			}
			var stranger int32
			testenv.Eventually(t, 10*time.Second, func() bool {
				for _, s := range childrenOf(mpid, "sleep") {
					if uidOf(s) == 0 {
						stranger = s
						return true
					}
				}
				return false
			}, "no root-owned child adopted by the namespace init %d", mpid)
			t.Cleanup(func() { syscall.Kill(int(stranger), syscall.SIGKILL) })

			c := admitAs(t, d, mpid)
			res := release(t, d, asNobody, c.ID)
			if res.Outcome == nil || res.Outcome.Acted || !strings.Contains(res.Outcome.Error, "pid namespace") ||
				!strings.Contains(res.Outcome.Error, strconv.Itoa(int(stranger))) {
				t.Errorf("release of namespace init %d = %+v, want it refused naming the adopted stranger %d", mpid, res.Outcome, stranger)
			}
			if !alivePid(stranger) || !alivePid(mpid) {
				t.Errorf("stranger %d alive %v, namespace init %d alive %v: want both alive", stranger, alivePid(stranger), mpid, alivePid(mpid))
			}
			m.Process.Kill()

			// A namespace of nobody's own proven members goes.
			_, own := userNamespace(t, "sleep 1000 & sleep 1000 & wait")
			var kids []int32
			testenv.Eventually(t, 10*time.Second, func() bool {
				kids = childrenOf(own, "sleep")
				return len(kids) == 2
			}, "namespace init %d never started its two children", own)
			c = admitAs(t, d, own)
			res = release(t, d, asNobody, c.ID)
			if res.Outcome == nil || !res.Outcome.Acted {
				t.Fatalf("release of a namespace of proven members = %+v, want a teardown", res.Outcome)
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				return !alivePid(own) && !alivePid(kids[0]) && !alivePid(kids[1])
			}, "the namespace of proven members (%d, %v) was not torn down", own, kids)
		})
	}
}

// userNamespace starts, as nobody, a new user and pid namespace whose
// init runs script; it returns unshare's command and the init's host pid.
func userNamespace(t *testing.T, script string) (*exec.Cmd, int32) {
	t.Helper()
	cmd := exec.Command("unshare", "-Ufp", "--map-root-user", "--fork", "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: asNobody}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var init int32
	testenv.Eventually(t, 10*time.Second, func() bool {
		kids := childrenOf(int32(cmd.Process.Pid), "")
		if len(kids) != 1 {
			return false
		}
		ns, err := procfs.NSpid("/proc", kids[0])
		init = kids[0]
		return err == nil && len(ns) == 2 && ns[1] == 1
	}, "unshare %d never started its namespace init", cmd.Process.Pid)
	t.Cleanup(func() { syscall.Kill(int(init), syscall.SIGKILL) })
	return cmd, init
}

// admitAs admits pid as nobody and returns the claim.
func admitAs(t *testing.T, d *testDaemon, pid int32) api.Claim {
	t.Helper()
	return claimAs(t, d, asNobody, "admit", strconv.Itoa(int(pid)), tokenOf(t, int(pid)))
}

// claimAs runs a command that prints a claim (admit, launch --json) as
// cred and returns the claim.
func claimAs(t *testing.T, d *testDaemon, cred *syscall.Credential, args ...string) api.Claim {
	t.Helper()
	code, out, errs := d.run(t, cred, args...)
	if code != 0 {
		t.Fatalf("%q as uid %d: exit %d: %s", args, cred.Uid, code, errs)
	}
	var c api.Claim
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%q as uid %d: %q: %v", args, cred.Uid, out, err)
	}
	return c
}

// TestIntegrationWallClockDoubleFork: a grant's root double-forks a sleep
// and exits at once; its wall clock runs out 3 s later. With the grant's
// own cgroup, the sleep is proven a member and torn down at expiry though
// the root is long gone. Without a cgroup, nothing proves it: it is
// reported, not signalled.
func TestIntegrationWallClockDoubleFork(t *testing.T) {
	testenv.RequireRoot(t)
	for _, cg := range []string{"auto", "off"} {
		t.Run("cgroup "+cg, func(t *testing.T) {
			state, sock := newDirs(t)
			d := startDaemon(t, state, sock, "--cgroup", cg)
			pidFile := filepath.Join(t.TempDir(), "pid")
			c := d.launch(t, "--wall-clock", "3s", "--", "sh", "-c", fmt.Sprintf("sleep 1003 & echo $! > %s; exit 0", pidFile))
			if cg == "auto" && c.Cgroup == "" {
				testenv.Skip(t, "no grant cgroup on this host")
			}
			spid, stok := readPid(t, pidFile)
			t.Cleanup(func() { syscall.Kill(int(spid), syscall.SIGKILL) })
			var got api.Claim
			testenv.Eventually(t, 30*time.Second, func() bool {
				got = d.claim(t, c.ID)
				return got.State == store.Released
			}, "grant %s with a 3 s wall clock not released", c.ID)
			if cg == "auto" {
				testenv.Eventually(t, 10*time.Second, func() bool { return !owned(spid, stok) },
					"the double-forked sleep %d in the grant's cgroup outlived the wall clock", spid)
				return
			}
			if !owned(spid, stok) {
				t.Errorf("the double-forked sleep %d was signalled without a cgroup to prove it a member", spid)
			}
			if got.Release == nil || !slices.ContainsFunc(got.Release.Unproven, func(i api.Instance) bool { return i.Pid == spid }) {
				t.Errorf("release %+v: want %d reported unproven", got.Release, spid)
			}
		})
	}
}
