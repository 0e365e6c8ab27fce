package daemon

import (
	"context"
	"syscall"
	"time"
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"golang.org/x/sys/unix"
)

// This file reaps the daemon's own children with wait4: launched roots,
// whose exit status gives a job its code, and processes reparented to the
// daemon as child subreaper. (Claim reconciliation, which the API calls
// "reap", is reconcile_linux.go.)

// exitEventGrace is how long a grant root's reaped exit waits for its exit
// event before the pass is queued anyway.
const exitEventGrace = 200 * time.Millisecond

// waitChildren reaps the daemon's exited children: launched roots, whose
// status it records, and every other zombie child it has (see adopted).
func (d *Daemon) waitChildren() {
	type reaped struct {
		pid int32
		id  string
		ws  syscall.WaitStatus
	}
	var done []reaped
	d.reapMu.Lock()
	// waitid(P_ALL, WNOWAIT) names an exited child without reaping it: the
	// cost follows the children that exited, not the thousands running.
	// One the daemon must not reap (its ps poller's) ends the loop; it is
	// reaped by its own Wait, and the rest on the next SIGCHLD.
	for {
		pid, err := exitedChild()
		if err != nil || pid <= 0 {
			break
		}
		d.mu.RLock()
		id, launched := d.children[pid]
		_, starting := d.starting[id]
		d.mu.RUnlock()
		if !launched && !d.adopted(pid) {
			break
		}
		// The name of a root whose launch still runs, read while its
		// zombie holds the pid, says whether it ended before its
		// workload's exec.
		beforeExec := launched && starting && zombieBeforeExec(pid)
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(int(pid), &ws, syscall.WNOHANG, nil)
		if err != nil || got != int(pid) {
			break // reaped meanwhile by its own Wait; the next SIGCHLD goes on
		}
		if launched {
			d.mu.Lock()
			delete(d.children, pid)
			if st, ok := d.starting[id]; ok {
				// Its launch has not stored the pid yet: the launch
				// hands the status on when it has.
				if st == nil {
					d.starting[id] = &earlyExit{ws: ws, beforeExec: beforeExec}
				}
				d.mu.Unlock()
				continue
			}
			d.mu.Unlock()
			done = append(done, reaped{pid, id, ws})
		}
	}
	d.reapMu.Unlock()
	for _, r := range done {
		d.rootReaped(r.id, r.pid, r.ws)
	}
}

// rootReaped acts on a launched root's exit status. No claim lock: a
// teardown's worker may hold it for its whole grace, and this runs on the
// main loop. The store's transactions decide.
func (d *Daemon) rootReaped(id string, pid int32, ws syscall.WaitStatus) {
	c, err := d.st.Get(id)
	if err != nil || !Open(c.State) || c.Pid != pid {
		return
	}
	if c.Kind == store.Job {
		d.finishJob(&c, ws, true)
		return
	}
	// The root's exit event queues the pass once the graph holds
	// everything before it; this is the backstop for an event the
	// source lost.
	time.AfterFunc(exitEventGrace, func() { d.queue(c.ID, Pass) })
}

// earlyExit is a launched root's exit, reaped while its launch ran.
type earlyExit struct {
	ws syscall.WaitStatus
	// beforeExec: it ended in the shim, before the workload's exec
	// (spawn.BeforeExec).
	beforeExec bool
}

// zombieBeforeExec reports whether pid, a zombie child of the daemon not
// yet reaped (so the pid is its own), ended in the spawn shim before its
// workload's exec.
func zombieBeforeExec(pid int32) bool {
	var st procfs.Stat
	r := procfs.Reader{Root: "/proc"}
	return r.ReadStat(pid, &st) == nil && st.Zombie() && spawn.BeforeExec(st.CommString())
}

// exitBeforeExec reports whether the launch id's process, pid@tok, which
// the spawn says has exec'd (its status pipe ended), in fact never ran its
// workload, and with what status it ended. The pipe's end comes with the
// exec and with the exit alike: a caller's seccomp filter that kills or
// traps execve ended the shim there, and the launch answered 201 for a
// workload that never ran; one that also kept the shim's failure from the
// pipe and refused its exit left it waiting, a claim's root.
//
// The shim's name (spawn.BeforeExec) sorts the cases cheaply: a process
// the exec renamed has run its workload. The exec closes the pipe a moment
// before it renames the process, and the exit a moment before the pidfd
// says so, so one still under the shim's name is looked at again, each
// time its pidfd's exit or execSettle comes first, execSettleTries times.
// The name proves nothing the other way (a workload may take it with
// prctl): a process that ended under it, or lives under it still, did not
// run only where the graph proves it (neverExeced); otherwise it is taken
// to have run, as before, and its claim keeps it. A shim alive and proven
// never to have exec'd is killed. One that ended is read as a zombie
// under reapMu (the reaper waits, the pid stays its own) or, reaped
// already, from what the reaper read before it reaped.
func (d *Daemon) exitBeforeExec(id string, sp spawn.Process, tok token.Token, lost lossMark) (syscall.WaitStatus, bool) {
	r := procfs.Reader{Root: "/proc"}
	alive := true
	for try := 0; try < execSettleTries; try++ {
		if alive = pidfd.FdAlive(sp.Pidfd); !alive {
			break
		}
		var st procfs.Stat
		if r.ReadStat(sp.Pid, &st) != nil || !spawn.BeforeExec(st.CommString()) {
			return 0, false // renamed by its exec
		}
		fds := []unix.PollFd{{Fd: int32(sp.Pidfd), Events: unix.POLLIN}}
		unix.Poll(fds, int(execSettle/time.Millisecond))
	}
	if alive {
		if !d.neverExeced(sp.Pid, tok, lost) {
			return 0, false
		}
		unix.PidfdSendSignal(sp.Pidfd, unix.SIGKILL, nil, 0)
		return syscall.WaitStatus(unix.SIGKILL), true
	}
	d.reapMu.Lock()
	d.mu.RLock()
	early := d.starting[id]
	d.mu.RUnlock()
	var ws syscall.WaitStatus
	before := false
	if early != nil {
		ws, before = early.ws, early.beforeExec
	} else if zombieBeforeExec(sp.Pid) {
		ws, before = pidfdStatus(sp.Pidfd)
	}
	d.reapMu.Unlock()
	if !before || !d.neverExeced(sp.Pid, tok, lost) {
		return 0, false
	}
	return ws, true
}

// neverExeced reports whether the graph proves that the launch process
// pid@tok never exec'd its workload: it has watched it without a gap from
// the fork it saw, saw one exec of it, the shim's own, not a second, and
// the source lost nothing since lost was taken, before the spawn (an eBPF
// record dropped in a full ring is counted by the kernel before the
// source reports it, and a graph that had not yet heard of the loss
// showed the node watched without a gap). False where it cannot tell: a
// mechanism without exec events (polling), a loss, a graph that cannot
// catch up, the node gone.
func (d *Daemon) neverExeced(pid int32, tok token.Token, lost lossMark) bool {
	tr := d.tr.Load()
	if tr == nil || !lost.ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchUpWait)
	defer cancel()
	if tr.Sync(ctx) != nil {
		return false
	}
	w, ok := tr.Graph().Watch(pid, tok)
	if !ok || w.Match != token.Same || !w.Continuous ||
		!w.Node.Flags.Has(lineage.BornObserved|lineage.Execed) || w.Node.Flags.Has(lineage.Reexeced) {
		return false
	}
	n, ok := tr.Losses()
	return ok && n == lost.n
}

// lossMark is the tracker's loss count (Tracker.Losses) taken before a
// spawn.
type lossMark struct {
	n  uint64
	ok bool
}

// losses takes a lossMark.
func (d *Daemon) losses() lossMark {
	var m lossMark
	if tr := d.tr.Load(); tr != nil {
		m.n, m.ok = tr.Losses()
	}
	return m
}

// execSettle and execSettleTries bound exitBeforeExec's wait for a process
// between its pipe's end and its exec's rename or its exit: microseconds,
// unless it is preempted there.
const (
	execSettle      = 2 * time.Millisecond
	execSettleTries = 500
)

// pidfdStatus returns the wait status of the exited process pidfd names,
// leaving it unreaped.
func pidfdStatus(fd int) (syscall.WaitStatus, bool) {
	var si siginfo
	_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_PIDFD, uintptr(fd), uintptr(unsafe.Pointer(&si)),
		unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
	if e != 0 || si.pid == 0 {
		return 0, false
	}
	switch si.code {
	case cldExited:
		return syscall.WaitStatus(si.status&0xff) << 8, true
	case cldKilled:
		return syscall.WaitStatus(si.status & 0x7f), true
	case cldDumped:
		return syscall.WaitStatus(si.status&0x7f | 0x80), true
	}
	return 0, false
}

// si_code values of a child's exit (asm-generic/siginfo.h).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// adopted reports whether a zombie child of the daemon, not one it
// launched, is one it reaps: every zombie child (processes reparented to
// it as subreaper, children a job made with CLONE_PARENT), but for the
// ps processes its own ps poller forks and waits for itself. Limit: under
// the ps mechanism, a zombie another process named "ps" is left to init
// when the daemon stops.
func (d *Daemon) adopted(pid int32) bool {
	var st procfs.Stat
	r := procfs.Reader{Root: "/proc"}
	if err := r.ReadStat(pid, &st); err != nil || !st.Zombie() {
		return false
	}
	if tr := d.tr.Load(); tr != nil && tr.Mechanism() == events.PSPoll && st.CommString() == "ps" {
		return false
	}
	return true
}

// siginfo is the part of the kernel's siginfo_t that waitid fills for a
// child: si_pid, si_uid and si_status follow three ints and padding on
// 64-bit Linux.
type siginfo struct {
	signo, errno, code, _ int32
	pid, uid, status      int32
	_                     [100]byte
}

// exitedChild returns an exited child of this process, leaving it
// unreaped, or 0 when none has exited.
func exitedChild() (int32, error) {
	var si siginfo
	_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_ALL, 0, uintptr(unsafe.Pointer(&si)),
		unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return si.pid, nil
}
