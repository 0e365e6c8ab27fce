package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/store"
)

// startEnv reads what a launch's process has just after its exec: its
// umask, nice value, scheduling policy, I/O priority, oom_score_adj, CPU
// affinity and seccomp filters, which the shim set from its caller's and
// the daemon's (spawn). The process is the daemon's child, read under
// reapMu while it lives, so its pid is its own. nil when it has ended or
// a read fails. It is read once; the workload may change them later.
func (d *Daemon) startEnv(sp spawn.Process) *store.StartEnv {
	d.reapMu.Lock()
	defer d.reapMu.Unlock()
	if !pidfd.FdAlive(sp.Pidfd) {
		return nil
	}
	s := callerSched(sp.Pid)
	if s.err != nil {
		return nil
	}
	dir := "/proc/" + strconv.Itoa(int(sp.Pid))
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return nil
	}
	nice, err := niceOf(dir)
	if err != nil {
		return nil
	}
	line := func(key string) string {
		v, _ := procfs.LineValue(status, key)
		return strings.TrimSpace(string(v))
	}
	filters, _ := strconv.Atoi(line("Seccomp_filters:"))
	cpus := line("Cpus_allowed_list:")
	if len(cpus) > store.MaxCPUsText {
		cpus = cpus[:store.MaxCPUsText-3] + "..."
	}
	return &store.StartEnv{Umask: line("Umask:"), Nice: nice, Policy: policyName(s.policy), IOPrio: ioprioName(s.ioprio),
		OOMScoreAdj: s.oomScoreAdj, CPUs: cpus, SeccompFilters: filters}
}

// niceOf reads the nice value of the process whose /proc directory is
// dir: field 19 of its stat line, the 17th after the comm's parenthesis.
func niceOf(dir string) (int, error) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s/stat: no comm field", dir)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 17 {
		return 0, fmt.Errorf("%s/stat: no nice field", dir)
	}
	return strconv.Atoi(f[16])
}

// policyName names a scheduling policy as sched(7) does.
func policyName(p int) string {
	switch p {
	case unix.SCHED_NORMAL:
		return "SCHED_OTHER"
	case unix.SCHED_FIFO:
		return "SCHED_FIFO"
	case unix.SCHED_RR:
		return "SCHED_RR"
	case unix.SCHED_BATCH:
		return "SCHED_BATCH"
	case unix.SCHED_IDLE:
		return "SCHED_IDLE"
	case unix.SCHED_DEADLINE:
		return "SCHED_DEADLINE"
	}
	return "policy " + strconv.Itoa(p)
}

// ioprioName names an I/O priority (class << 13 | level) as ionice(1)
// does: "none", "realtime/N", "best-effort/N", "idle".
func ioprioName(p int) string {
	level := strconv.Itoa(p & 0x1fff)
	switch p >> 13 {
	case 0:
		return "none"
	case 1:
		return "realtime/" + level
	case 2:
		return "best-effort/" + level
	case 3:
		return "idle"
	}
	return "class " + strconv.Itoa(p>>13) + "/" + level
}
