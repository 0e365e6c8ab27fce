package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationLaunchCallersScheduling: a job launched for a user has
// its caller's scheduling policy, I/O priority, oom_score_adj and CPUs
// where they are less favoured than the daemon's. Before, it had the
// daemon's: a user its admin had put at SCHED_IDLE, ionice -c 3 and an
// oom_score_adj of 300 (none of which it may undo) ran its jobs at
// SCHED_OTHER, the class none and 0, and a caller pinned to CPU 0 got a
// job on every CPU.
func TestIntegrationLaunchCallersScheduling(t *testing.T) {
	h := newHarness(t)
	if runtime.NumCPU() < 2 {
		testenv.Skip(t, "needs two CPUs to tell the caller's affinity from the daemon's")
	}
	own := callerSched(int32(os.Getpid()))
	if own.err != nil {
		t.Fatal(own.err)
	}
	if own.policy != unix.SCHED_NORMAL || own.ioprio>>13 > 2 || own.oomScoreAdj >= 300 {
		testenv.Skip(t, "the test runs at policy %d, I/O priority %#x, oom_score_adj %d: a caller's less favoured ones cannot be told from them", own.policy, own.ioprio, own.oomScoreAdj)
	}
	core := uint32(0x21)
	tests := []struct {
		name  string
		set   func(pid int) error // the caller's, set by the test (root)
		want  schedOf
		wantC string // the job's Cpus_allowed_list
	}{
		{"idle, I/O idle, oom 300, CPU 0", func(pid int) error {
			if err := unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
				return err
			}
			if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, 1, uintptr(pid), 3<<13); errno != 0 {
				return errno
			}
			var cpu0 unix.CPUSet
			cpu0.Set(0)
			if err := unix.SchedSetaffinity(pid, &cpu0); err != nil {
				return err
			}
			if err := os.WriteFile(fmt.Sprintf("/proc/%d/coredump_filter", pid), []byte("0x21"), 0); err != nil {
				return err
			}
			return os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte("300"), 0)
		}, schedOf{policy: unix.SCHED_IDLE, ioprio: 3 << 13, oomScoreAdj: 300, coredumpFilter: &core}, "0"},
		{"batch, best-effort 7", func(pid int) error {
			if err := unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_BATCH}, 0); err != nil {
				return err
			}
			if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, 1, uintptr(pid), 2<<13|7); errno != 0 {
				return errno
			}
			return nil
		}, schedOf{policy: unix.SCHED_BATCH, ioprio: 2<<13 | 7, oomScoreAdj: own.oomScoreAdj}, cpuList(t, os.Getpid())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caller := exec.Command("/bin/sh", "-c", "exec /bin/sleep 600")
			caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			pid := startCaller(t, caller)
			if err := tt.set(pid); err != nil {
				t.Fatalf("setting the caller's scheduling: %v", err)
			}
			p := api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)}
			cl := launchSleeper(t, h, p, "/bin/sleep", "600")
			got := callerSched(cl.Pid)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if got.policy != tt.want.policy || got.ioprio != tt.want.ioprio || got.oomScoreAdj != tt.want.oomScoreAdj {
				t.Errorf("job at policy %d, I/O priority %#x, oom_score_adj %d; want its caller's %d, %#x, %d",
					got.policy, got.ioprio, got.oomScoreAdj, tt.want.policy, tt.want.ioprio, tt.want.oomScoreAdj)
			}
			if w := tt.want.coredumpFilter; w != nil && (got.coredumpFilter == nil || *got.coredumpFilter != *w) {
				t.Errorf("job's coredump_filter %v, want its caller's %#x", deref(got.coredumpFilter), *w)
			}
			if c := cpuList(t, int(cl.Pid)); c != tt.wantC {
				t.Errorf("job on CPUs %s, want %s", c, tt.wantC)
			}
			if s := cl.Started; s == nil || s.Policy != policyName(tt.want.policy) || s.IOPrio != ioprioName(tt.want.ioprio) ||
				s.OOMScoreAdj != tt.want.oomScoreAdj || s.CPUs != tt.wantC {
				t.Errorf("the claim says the job started with %+v, want policy %s, I/O %s, oom_score_adj %d, CPUs %s", s,
					policyName(tt.want.policy), ioprioName(tt.want.ioprio), tt.want.oomScoreAdj, tt.wantC)
			}
		})
	}
}

// cpuList returns the Cpus_allowed_list of process pid.
func cpuList(t *testing.T, pid int) string {
	t.Helper()
	return statusLine(t, pid, "Cpus_allowed_list:")
}

// TestIntegrationLaunchRootsOwn: a job that stays uid 0 keeps root's
// rights and takes its caller's groups. Root naming only a gid got a job
// without capabilities (it could not enter a directory only another user
// may), and root's caller's job had the daemon's groups, not the
// caller's.
func TestIntegrationLaunchRootsOwn(t *testing.T) {
	h := newHarness(t)
	dir := testenv.ReachableDir(t, 0o755)
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(private, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	caller := exec.Command("/bin/sleep", "600")
	caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{4321, 4322}}}
	pid := startCaller(t, caller)
	p := api.Peer{UID: 0, GID: 0, Pid: int32(pid)}

	cl := launchSleeper(t, h, p, "/bin/sleep", "600")
	if got := statusLine(t, int(cl.Pid), "Groups:"); got != "4321 4322" {
		t.Errorf("root's caller with groups 4321 4322 launched a job with groups %q", got)
	}

	gid := uint32(65534)
	cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: []string{"/bin/sleep", "600"}, Cwd: private, GID: &gid})
	if err != nil {
		t.Fatalf("root naming gid %d, in a directory only uid 65534 may enter: %v", gid, err)
	}
	t.Cleanup(func() { syscall.Kill(int(cl.Pid), syscall.SIGKILL) })
}

// statusLine returns the value of a line of process pid's status.
func statusLine(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s line", pid, name)
	return ""
}

// deref formats an optional coredump_filter.
func deref(p *uint32) string {
	if p == nil {
		return "unread"
	}
	return fmt.Sprintf("%#x", *p)
}
