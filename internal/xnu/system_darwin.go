package xnu

import (
	"fmt"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Flavors of proc_pidinfo (bsd/sys/proc_info_private.h).
const (
	flavorUniqIdentifierInfo = 17 // PROC_PIDUNIQIDENTIFIERINFO
	flavorBSDInfoWithUniqID  = 18 // PROC_PIDT_BSDINFOWITHUNIQID
)

// System is the running XNU kernel.
type System struct {
	once      sync.Once
	signalFn  uintptr
	signalErr error
}

// NewSystem returns the running kernel.
func NewSystem() *System { return &System{} }

func (s *System) resolve() {
	s.once.Do(func() {
		s.signalFn = dlsym("proc_signal_with_audittoken")
		if s.signalFn == 0 {
			s.signalErr = fmt.Errorf("libSystem has no proc_signal_with_audittoken (this macOS is older than 14.4): %w", ErrNoTokenSignal)
		}
	})
}

// CanSignal reports why Signal cannot work here, or nil.
func (s *System) CanSignal() error {
	s.resolve()
	return s.signalErr
}

// Signal sends sig through proc_signal_with_audittoken.
func (s *System) Signal(t AuditToken, sig unix.Signal) error {
	s.resolve()
	if s.signalErr != nil {
		return s.signalErr
	}
	if t.Pid() <= 1 {
		return fmt.Errorf("audit token names pid %d: %w", t.Pid(), ErrPermission)
	}
	tok := t
	switch e := signalWithAuditToken(s.signalFn, &tok, int(sig)); e {
	case 0:
		return nil
	case syscall.ESRCH:
		return fmt.Errorf("proc_signal_with_audittoken pid %d version %d: %w", t.Pid(), t.PidVersion(), ErrNoProcess)
	case syscall.EPERM:
		return fmt.Errorf("proc_signal_with_audittoken pid %d: %w", t.Pid(), ErrPermission)
	default:
		return fmt.Errorf("proc_signal_with_audittoken pid %d: %w", t.Pid(), e)
	}
}

// Identity reads flavor 18; where the kernel refuses it (another uid, not
// root), flavor 17 with the start time from kern.proc between two replies
// (withStart). proc_pidinfo reports failure by returning 0; flavor 17 has no
// same-user check, so when it fails too, kern.proc tells a gone pid or a
// zombie (ErrNoProcess) from a live process the kernel would not describe.
func (s *System) Identity(pid int32) (Ident, error) {
	var b bsdInfoWithUniqID
	if n := procPidinfo(pid, flavorBSDInfoWithUniqID, unsafe.Pointer(&b), int(unsafe.Sizeof(b))); n == int(unsafe.Sizeof(b)) {
		if int32(b.BSD.Pid) != pid {
			return Ident{}, fmt.Errorf("proc_pidinfo %d answered for pid %d", pid, b.BSD.Pid)
		}
		return identFromBSD(pid, &b), nil
	}
	return withStart(func() (Ident, error) { return s.IDs(pid) }, func() (uint64, error) {
		k, err := unix.SysctlKinfoProc("kern.proc.pid", int(pid))
		if err != nil {
			return 0, err
		}
		st := k.Proc.P_starttime
		if k.Proc.P_pid != pid || st.Sec <= 0 {
			return 0, fmt.Errorf("kern.proc.pid %d: no start time", pid)
		}
		return uint64(st.Sec)*1e6 + uint64(st.Usec), nil
	})
}

// IDs reads flavor 17 alone (no same-user check).
func (s *System) IDs(pid int32) (Ident, error) {
	var u uniqIdentifierInfo
	if n := procPidinfo(pid, flavorUniqIdentifierInfo, unsafe.Pointer(&u), int(unsafe.Sizeof(u))); n != int(unsafe.Sizeof(u)) {
		return Ident{}, s.whyNot(pid)
	}
	return identFromUniq(pid, &u), nil
}

// whyNot tells why proc_pidinfo failed for pid, by kern.proc.
func (s *System) whyNot(pid int32) error {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", int(pid))
	switch {
	case err != nil:
		return fmt.Errorf("proc_pidinfo %d failed, and kern.proc.pid too: %w", pid, err)
	case k.Proc.P_pid != pid || k.Proc.P_stat == 5: // absent, or SZOMB
		return fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	return fmt.Errorf("proc_pidinfo refused to describe live process %d", pid)
}

// Pids lists every pid, zombies included (proc_listallpids).
func (s *System) Pids() ([]int32, error) {
	n, err := procListallpids(nil)
	if err != nil {
		return nil, fmt.Errorf("proc_listallpids: %w", err)
	}
	for range 4 {
		buf := make([]int32, n+64)
		got, err := procListallpids(buf)
		if err != nil {
			return nil, fmt.Errorf("proc_listallpids: %w", err)
		}
		if got < len(buf) {
			if got == 0 {
				return nil, fmt.Errorf("proc_listallpids: an empty process table")
			}
			return buf[:got], nil
		}
		n = 2 * len(buf)
	}
	return nil, fmt.Errorf("proc_listallpids: the table kept growing")
}

// Kqueue is a Watcher on a kqueue with EVFILT_PROC knotes.
type Kqueue struct{ fd int }

// NewKqueue opens a kqueue. Close it when done.
func NewKqueue() (*Kqueue, error) {
	fd, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("kqueue: %w", err)
	}
	unix.CloseOnExec(fd)
	return &Kqueue{fd: fd}, nil
}

// Close closes the kqueue.
func (q *Kqueue) Close() error { return unix.Close(q.fd) }

func (q *Kqueue) change(pid int32, flags uint16) error {
	ev := unix.Kevent_t{Ident: uint64(pid), Filter: unix.EVFILT_PROC, Flags: flags,
		Fflags: unix.NOTE_FORK | unix.NOTE_EXEC | unix.NOTE_EXIT}
	_, err := unix.Kevent(q.fd, []unix.Kevent_t{ev}, nil, nil)
	return err
}

// Attach adds an EVFILT_PROC knote for the instance at pid.
func (q *Kqueue) Attach(pid int32) error {
	err := q.change(pid, unix.EV_ADD|unix.EV_ENABLE)
	if err == unix.ESRCH {
		return fmt.Errorf("kevent EVFILT_PROC %d: %w", pid, ErrNoProcess)
	}
	return err
}

// Detach deletes the knote for pid.
func (q *Kqueue) Detach(pid int32) error { return q.change(pid, unix.EV_DELETE) }

// Wait returns the pending notes, waiting up to d for the first.
func (q *Kqueue) Wait(d time.Duration) ([]Note, error) {
	var evs [64]unix.Kevent_t
	ts := unix.NsecToTimespec(d.Nanoseconds())
	n, err := unix.Kevent(q.fd, nil, evs[:], &ts)
	if err == unix.EINTR {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kevent: %w", err)
	}
	notes := make([]Note, 0, n)
	for _, ev := range evs[:n] {
		if ev.Filter != unix.EVFILT_PROC || ev.Flags&unix.EV_ERROR != 0 {
			continue
		}
		notes = append(notes, Note{Pid: int32(ev.Ident), Fork: ev.Fflags&unix.NOTE_FORK != 0,
			Exec: ev.Fflags&unix.NOTE_EXEC != 0, Exit: ev.Fflags&unix.NOTE_EXIT != 0})
	}
	return notes, nil
}
