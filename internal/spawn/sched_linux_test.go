package spawn

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// schedReport is the workload that reports its scheduling: its policy
// and static priority, its I/O priority (ionice), its oom_score_adj and
// the CPUs it may run on.
var schedReport = []string{"sh", "-c", `grep -E "^policy " /proc/self/sched | tr -s " "; ionice; cat /proc/self/oom_score_adj; grep Cpus_allowed_list /proc/self/status`}

// setThreadIOPrio sets the calling thread's I/O priority.
func setThreadIOPrio(class, level int) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProc, 0, uintptr(class<<13|level)); errno != 0 {
		return fmt.Errorf("ioprio_set: %w", errno)
	}
	return nil
}

// setOwnOOMScoreAdj sets this process's oom_score_adj, and puts its own
// back when the test ends (lowering it back is allowed down to the floor
// it had before, its own).
func setOwnOOMScoreAdj(t *testing.T, v int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile("/proc/self/oom_score_adj", b, 0) })
}

// TestIntegrationShimSchedulingNotTheDaemons: the workload never has the
// realtime scheduling policy or I/O class of the daemon's thread that
// forked it, takes the caller's policy, I/O priority and oom_score_adj
// where they are less favoured than the daemon's (never where they are
// more), and the caller's CPUs. Before, a workload forked from a thread
// at SCHED_RR and ionice -c 1 ran at both, with the daemon's
// oom_score_adj and CPUs.
func TestIntegrationShimSchedulingNotTheDaemons(t *testing.T) {
	if runtime.NumCPU() < 2 {
		testenv.Skip(t, "needs two CPUs to tell the caller's affinity from the daemon's")
	}
	setOwnOOMScoreAdj(t, 100) // the daemon's
	realtime := func() error {
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR, Priority: 1}, 0); err != nil {
			return fmt.Errorf("sched_setattr SCHED_RR: %w", err)
		}
		if err := setThreadIOPrio(ioprioClassRT, 0); err != nil {
			return err
		}
		var cpu1 unix.CPUSet
		cpu1.Set(1)
		return unix.SchedSetaffinity(0, &cpu1)
	}
	background := func() error {
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_BATCH}, 0); err != nil {
			return fmt.Errorf("sched_setattr SCHED_BATCH: %w", err)
		}
		return setThreadIOPrio(ioprioClassIdle, 0)
	}
	n := func(v int) *int { return &v }
	tests := []struct {
		name   string
		daemon func() error
		spec   Spec
		want   string
	}{
		{"nothing of the caller's, daemon realtime", realtime, Spec{},
			"policy : 0\nnone: prio 0\n100\nCpus_allowed_list:\t1\n"},
		{"caller batch, best-effort 7, oom 300, CPU 0", realtime,
			Spec{Policy: n(unix.SCHED_BATCH), IOPrio: n(ioprioClassBE<<13 | 7), OOMScoreAdj: n(300), Affinity: []uint64{1}},
			"policy : 3\nbest-effort: prio 7\n300\nCpus_allowed_list:\t0\n"},
		{"caller idle, I/O idle, oom below the daemon's", realtime,
			Spec{Policy: n(unix.SCHED_IDLE), IOPrio: n(ioprioClassIdle << 13), OOMScoreAdj: n(50), Affinity: []uint64{3}},
			"policy : 5\nidle\n100\nCpus_allowed_list:\t0-1\n"},
		{"caller realtime", realtime,
			Spec{Policy: n(unix.SCHED_FIFO), IOPrio: n(ioprioClassRT<<13 | 3)},
			"policy : 0\nnone: prio 0\n100\nCpus_allowed_list:\t1\n"},
		{"caller ordinary, daemon batch and I/O idle", background,
			Spec{Policy: n(unix.SCHED_NORMAL), IOPrio: n(ioprioClassBE << 13), OOMScoreAdj: n(0)},
			"policy : 3\nidle\n100\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Argv = schedReport
			out := fromThread(t, tt.daemon, spec)
			if !strings.HasPrefix(out, tt.want) {
				t.Errorf("workload said\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
}

// TestIOPrioFor: the workload's I/O priority is the caller's where that
// is less favoured than the daemon's, never the realtime class, and the
// class none where the caller gave none.
func TestIOPrioFor(t *testing.T) {
	p := func(class, level int) int { return class<<13 | level }
	n := func(v int) *int { return &v }
	tests := []struct {
		name       string
		caller     *int
		own, nice  int
		want       int
		wantChange bool
	}{
		{"both none", n(0), 0, 0, 0, false},
		{"caller unset, daemon realtime", nil, p(ioprioClassRT, 0), 0, 0, true},
		{"caller realtime, daemon realtime", n(p(ioprioClassRT, 4)), p(ioprioClassRT, 0), 0, 0, true},
		{"caller realtime, daemon best-effort 2", n(p(ioprioClassRT, 4)), p(ioprioClassBE, 2), 0, 0, true},
		{"caller realtime, daemon best-effort 6", n(p(ioprioClassRT, 4)), p(ioprioClassBE, 6), 0, p(ioprioClassBE, 6), false},
		{"caller idle", n(p(ioprioClassIdle, 0)), 0, 0, p(ioprioClassIdle, 0), true},
		{"caller best-effort 7 above none at nice 0", n(p(ioprioClassBE, 7)), 0, 0, p(ioprioClassBE, 7), true},
		{"caller best-effort 0 below none at nice 0", n(p(ioprioClassBE, 0)), 0, 0, 0, false},
		{"caller none at nice 19 above best-effort 4", n(0), p(ioprioClassBE, 4), 19, 0, true},
		{"daemon idle", n(p(ioprioClassBE, 7)), p(ioprioClassIdle, 0), 0, p(ioprioClassIdle, 0), false},
		{"caller's hint bits dropped", n(p(ioprioClassBE, 6) | 1<<3), 0, 0, p(ioprioClassBE, 6), true},
		{"unknown caller class", n(p(5, 0)), p(ioprioClassBE, 1), 0, 0, true},
	}
	for _, tt := range tests {
		got, change := ioprioFor(tt.caller, tt.own, tt.nice)
		if got != tt.want || change != tt.wantChange {
			t.Errorf("%s: ioprioFor = %#x, %v, want %#x, %v", tt.name, got, change, tt.want, tt.wantChange)
		}
	}
}

// TestLessFavouredPolicy: the less favoured of two policies, and never a
// realtime or deadline one.
func TestLessFavouredPolicy(t *testing.T) {
	tests := []struct{ a, b, want int }{
		{unix.SCHED_NORMAL, unix.SCHED_NORMAL, unix.SCHED_NORMAL},
		{unix.SCHED_FIFO, unix.SCHED_NORMAL, unix.SCHED_NORMAL},
		{unix.SCHED_RR, unix.SCHED_FIFO, unix.SCHED_NORMAL},
		{unix.SCHED_DEADLINE, unix.SCHED_RR, unix.SCHED_NORMAL},
		{unix.SCHED_RR, unix.SCHED_BATCH, unix.SCHED_BATCH},
		{unix.SCHED_IDLE, unix.SCHED_BATCH, unix.SCHED_IDLE},
		{unix.SCHED_NORMAL, unix.SCHED_IDLE, unix.SCHED_IDLE},
		{42, unix.SCHED_NORMAL, unix.SCHED_NORMAL},
	}
	for _, tt := range tests {
		if got := lessFavouredPolicy(tt.a, tt.b); got != tt.want {
			t.Errorf("lessFavouredPolicy(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
