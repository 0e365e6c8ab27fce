package daemon

import (
	"syscall"
	"time"
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
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
		d.mu.RUnlock()
		if !launched && !d.adopted(pid) {
			break
		}
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
					d.starting[id] = &ws
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
// child: si_pid follows three ints and padding on 64-bit Linux.
type siginfo struct {
	signo, errno, code, _ int32
	pid                   int32
	_                     [108]byte
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
