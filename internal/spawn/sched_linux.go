package spawn

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// This file holds how the shim weighs the caller's scheduling against the
// daemon's: policy, nice value, I/O priority, oom_score_adj and CPU
// affinity.

// optional formats an optional value for a message.
func optional(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

// takeSched gives the calling thread the less favourable of its own
// scheduling (the daemon's thread's that forked it) and the caller's, and
// returns the nice value it ends with. The policy is ranked realtime
// (never kept: SCHED_OTHER replaces it), SCHED_OTHER, SCHED_BATCH,
// SCHED_IDLE, and a nil policy counts as SCHED_OTHER; the nice value is
// the higher of the two, nil counting as the thread's own. The time
// slice is the kernel's default (a runtime of 0). Linux schedules
// threads: sched_setattr of 0 sets the calling one's, the one that execs
// (Main locks it). Nothing here needs privilege: leaving a realtime
// policy, raising a nice value and entering SCHED_BATCH or SCHED_IDLE
// are open to any process, whatever its RLIMIT_NICE and RLIMIT_RTPRIO.
func takeSched(policy, nice *int) (int, error) {
	own, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, fmt.Errorf("sched_getattr: %w", err)
	}
	pol := unix.SCHED_NORMAL
	if policy != nil {
		pol = *policy
	}
	pol = lessFavouredPolicy(int(own.Policy), pol)
	n := int(own.Nice)
	if nice != nil && *nice > n {
		n = min(*nice, 19) // the kernel's highest
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: uint32(pol), Nice: int32(n)}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return 0, fmt.Errorf("sched_setattr: %w", err)
	}
	return n, nil
}

// policyRank orders the policies a workload may end with, from the most
// favoured; a realtime, deadline or unknown policy ranks as SCHED_OTHER,
// which replaces it.
func policyRank(p int) int {
	switch p {
	case unix.SCHED_BATCH:
		return 1
	case unix.SCHED_IDLE:
		return 2
	}
	return 0
}

// lessFavouredPolicy returns the less favoured of two policies
// (policyRank), SCHED_OTHER for a realtime, deadline or unknown one.
func lessFavouredPolicy(a, b int) int {
	switch max(policyRank(a), policyRank(b)) {
	case 1:
		return unix.SCHED_BATCH
	case 2:
		return unix.SCHED_IDLE
	}
	return unix.SCHED_NORMAL
}

// The I/O priority classes and the field layout of an ioprio value
// (linux/ioprio.h): the class in bits 13-15, the level in bits 0-2.
const (
	ioprioClassNone = 0
	ioprioClassRT   = 1
	ioprioClassBE   = 2
	ioprioClassIdle = 3
	ioprioWhoProc   = 1 // IOPRIO_WHO_PROCESS
)

// ioRank orders I/O priorities from the most favoured: the realtime class
// by level (0-7), the best-effort class by level (8-15), the idle class
// (16). The class none is best-effort at the level the kernel derives
// from the nice value n, (n+20)/5.
func ioRank(prio, n int) int {
	level := prio & 7
	switch prio >> 13 {
	case ioprioClassRT:
		return level
	case ioprioClassBE:
		return 8 + level
	case ioprioClassIdle:
		return 16
	}
	return 8 + (n+20)/5
}

// ioprioFor is the I/O priority a workload takes from its caller's
// (nil: none given), at nice value n, against own (the thread's from the
// daemon): the caller's where it ranks less favoured than own, with the
// realtime class, which the workload never gets, and any unknown class
// taken as the class none; own otherwise, unless own is realtime. It
// reports whether the thread's must change.
func ioprioFor(caller *int, own, n int) (int, bool) {
	c := 0 // the class none, level 0
	if caller != nil {
		switch *caller >> 13 {
		case ioprioClassBE, ioprioClassIdle:
			c = *caller & (7 | 7<<13)
		}
	}
	if ioRank(c, n) > ioRank(own, n) || own>>13 == ioprioClassRT || own>>13 > ioprioClassIdle {
		return c, c != own
	}
	return own, false
}

// takeIOPrio gives the calling thread the caller's I/O priority where it
// is less favoured than the thread's own (ioprioFor), n being the nice
// value the thread ends with. ioprio_set of process 0 sets the calling
// thread's; the best-effort and idle classes need no privilege.
func takeIOPrio(caller *int, n int) error {
	own, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProc, 0, 0)
	if errno == unix.ENOSYS {
		return nil // a kernel without a block layer has no I/O priorities
	}
	if errno != 0 {
		return fmt.Errorf("ioprio_get: %w", errno)
	}
	prio, change := ioprioFor(caller, int(own), n)
	if !change {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProc, 0, uintptr(prio)); errno != 0 {
		return fmt.Errorf("ioprio_set %#x: %w", prio, errno)
	}
	return nil
}

// takeOOMScoreAdj raises the process's oom_score_adj to the caller's, v,
// where v is higher than its own (the daemon's); raising it needs no
// privilege. Without CAP_SYS_RESOURCE the floor the process has from the
// daemon (oom_score_adj_min) stays, and the workload may come back down
// to it (see the package comment).
func takeOOMScoreAdj(v int) error {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return err
	}
	own, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("/proc/self/oom_score_adj: %w", err)
	}
	v = min(v, 1000)
	if v <= own {
		return nil
	}
	return os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0)
}

// takeAffinity gives the calling thread (the one that execs) the caller's
// CPU affinity mask. A mask none of whose CPUs the workload's cgroup
// allows is refused by the kernel (EINVAL), and the thread keeps the
// daemon's: affinity is a placement, not a privilege, and the caller's
// own fork into that cgroup would have had the same refusal.
func takeAffinity(mask []uint64) {
	var set unix.CPUSet
	for i, w := range mask {
		for b := range 64 {
			if w&(1<<b) != 0 {
				set.Set(i*64 + b) // a CPU past the set's size is left out
			}
		}
	}
	if set.Count() > 0 {
		_ = unix.SchedSetaffinity(0, &set) // refused: kept, above
	}
}

// AffinityMask returns set as a Spec.Affinity mask.
func AffinityMask(set *unix.CPUSet) []uint64 {
	var mask []uint64
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			for len(mask) <= cpu/64 {
				mask = append(mask, 0)
			}
			mask[cpu/64] |= 1 << (cpu % 64)
		}
	}
	return mask
}
