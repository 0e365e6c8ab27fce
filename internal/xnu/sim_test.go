package xnu

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// sim is a simulated XNU process table behind Kernel and Watcher, with the
// rules of the published source (see the package comment): sequential pids
// from the last one handed out, wrapping at pidMax back to 100 and skipping
// pids held by a process (live or zombie), a process group or a session;
// fork gives a new uniqueid and pid version, exec a new pid version only;
// exit reparents the children to launchd and keeps their puniqueid; the
// token signal finds the pid (never a zombie) and checks the pid version;
// kqueue refuses a zombie. There is no Mac here: this is what the logic is
// proven against.
type sim struct {
	procs    map[int32]*simProc  // pid -> live or zombie process
	all      map[uint64]*simProc // uniqueid -> every process ever
	lastPid  int32
	pidMax   int32
	nextUniq uint64
	nextVer  int32
	clock    time.Time
	// symbol is whether proc_signal_with_audittoken exists.
	symbol bool
	// caller is the uid of the caller (0: root).
	caller uint32
	// adversarial: after a reap the next fork gets the reaped pid.
	adversarial bool
	// between runs before every kernel call (the adversary's moves).
	between func()
	inside  bool

	delivered []delivery
	kills     int              // kill(2) calls
	knotes    map[int32]uint64 // kqueue ident pid -> watched uniqueid
	notes     []Note
	calls     map[string]int   // calls by name
	ident17   map[int32]bool   // pids answered with flavor 17 only (tests)
	idErr     map[int32]error  // forced Identity errors (tests)
	onSignal  func(AuditToken) // called inside Signal before checks (tests)
}

type simProc struct {
	pid         int32
	uniq, puniq uint64
	ver         int32
	start       uint64
	ppid        int32
	uid         uint32
	pgid, sid   int32
	zombie      bool
	stopped     bool
	termPending bool
	ignoresTerm bool
	name        string
}

type delivery struct {
	uniq uint64
	pid  int32
	sig  unix.Signal
}

// newSim returns a table with the kernel (pid 0, uniqueid 0) and launchd
// (pid 1, uniqueid 1).
func newSim(pidMax int32) *sim {
	s := &sim{procs: map[int32]*simProc{}, all: map[uint64]*simProc{}, pidMax: pidMax, lastPid: 99,
		clock: time.Unix(1764432384, 0), symbol: true, knotes: map[int32]uint64{}, calls: map[string]int{},
		ident17: map[int32]bool{}, idErr: map[int32]error{}}
	kern := &simProc{pid: 0, uniq: 0, name: "kernel_task"}
	launchd := &simProc{pid: 1, uniq: 1, ver: 1, start: s.micro(), pgid: 1, sid: 1, name: "launchd"}
	s.procs[0], s.procs[1] = kern, launchd
	s.all[0], s.all[1] = kern, launchd
	s.nextUniq, s.nextVer = 1, 1
	return s
}

func (s *sim) micro() uint64 {
	s.clock = s.clock.Add(time.Microsecond)
	return uint64(s.clock.UnixMicro())
}

func (s *sim) now() time.Time { return s.clock }

func (s *sim) enter(name string) {
	s.calls[name]++
	if s.between != nil && !s.inside {
		s.inside = true
		s.between()
		s.inside = false
	}
}

// held reports whether pid may not be handed out (forkproc's loop).
func (s *sim) held(pid int32) bool {
	if s.procs[pid] != nil {
		return true
	}
	for _, p := range s.procs {
		if p.pgid == pid || p.sid == pid {
			return true
		}
	}
	return false
}

// free counts the pids a fork could get now.
func (s *sim) free() int {
	n := 0
	for pid := int32(100); pid < s.pidMax; pid++ {
		if !s.held(pid) {
			n++
		}
	}
	return n
}

func (s *sim) allocPid() int32 {
	pid := s.lastPid
	for {
		pid++
		if pid >= s.pidMax {
			pid = 100
		}
		if pid == s.lastPid {
			panic("sim: unable to allocate a new pid")
		}
		if !s.held(pid) {
			s.lastPid = pid
			return pid
		}
	}
}

func (s *sim) note(p *simProc, n Note) {
	for ident, u := range s.knotes {
		if u == p.uniq {
			n.Pid = ident
			s.notes = append(s.notes, n)
		}
	}
}

func (s *sim) fork(parent *simProc, name string) *simProc {
	if parent.zombie {
		panic("sim: a zombie cannot fork")
	}
	s.nextUniq++
	s.nextVer++
	c := &simProc{pid: s.allocPid(), uniq: s.nextUniq, puniq: parent.uniq, ver: s.nextVer, start: s.micro(),
		ppid: parent.pid, uid: parent.uid, pgid: parent.pgid, sid: parent.sid, name: name}
	s.procs[c.pid], s.all[c.uniq] = c, c
	s.note(parent, Note{Fork: true})
	return c
}

func (s *sim) exec(p *simProc, name string) {
	s.nextVer++
	p.ver, p.name = s.nextVer, name
	s.note(p, Note{Exec: true})
}

func (s *sim) exit(p *simProc) {
	if p.zombie || p.pid <= 1 {
		return
	}
	p.zombie = true
	for _, c := range s.procs {
		if c.ppid == p.pid && c != p {
			c.ppid = 1 // reparented to launchd; puniq stays
		}
	}
	s.note(p, Note{Exit: true})
	for ident, u := range s.knotes {
		if u == p.uniq {
			delete(s.knotes, ident)
		}
	}
}

func (s *sim) reap(p *simProc) {
	if !p.zombie || s.procs[p.pid] != p {
		return
	}
	delete(s.procs, p.pid)
	if s.adversarial {
		s.lastPid = p.pid - 1
		if s.lastPid < 100 {
			s.lastPid = s.pidMax - 1
		}
	}
}

func (s *sim) setpgid(p *simProc) { p.pgid = p.pid }

// deliver applies a signal as a process that handles none would.
func (s *sim) deliver(p *simProc, sig unix.Signal) {
	switch sig {
	case unix.SIGSTOP:
		p.stopped = true
	case unix.SIGCONT:
		p.stopped = false
		if p.termPending {
			s.exit(p)
		}
	case unix.SIGTERM:
		switch {
		case p.ignoresTerm:
		case p.stopped:
			p.termPending = true
		default:
			s.exit(p)
		}
	case unix.SIGKILL:
		s.exit(p)
	}
}

// kill is kill(2): by pid, and a zombie holds its pid (success, no effect).
func (s *sim) kill(pid int32, sig unix.Signal) error {
	s.kills++
	p := s.procs[pid]
	if p == nil {
		return unix.ESRCH
	}
	if !p.zombie {
		s.deliver(p, sig)
	}
	return nil
}

func (s *sim) live(pid int32) *simProc {
	if p := s.procs[pid]; p != nil && !p.zombie {
		return p
	}
	return nil
}

// descends reports whether uniq is root or descends from it by birth.
func (s *sim) descends(uniq, root uint64) bool {
	for u := uniq; ; {
		if u == root {
			return true
		}
		p := s.all[u]
		if p == nil || u <= 1 {
			return false
		}
		u = p.puniq
	}
}

// Kernel.

func (s *sim) Identity(pid int32) (Ident, error) {
	s.enter("Identity")
	if err := s.idErr[pid]; err != nil {
		return Ident{}, err
	}
	p := s.live(pid)
	if p == nil {
		return Ident{}, fmt.Errorf("proc_pidinfo %d: %w", pid, ErrNoProcess)
	}
	id := Ident{Pid: pid, UniqueID: p.uniq, PUniqueID: p.puniq, IDVersion: p.ver}
	if s.ident17[pid] { // flavor 17 alone
		return id, nil
	}
	id.StartMicro = p.start
	if s.caller != 0 && s.caller != p.uid { // flavor 17 and kern.proc, as System does
		return id, nil
	}
	id.PPid, id.UID, id.RUID, id.SVUID, id.HasCreds = p.ppid, p.uid, p.uid, p.uid, true
	return id, nil
}

func (s *sim) IDs(pid int32) (Ident, error) {
	s.enter("IDs")
	if err := s.idErr[pid]; err != nil {
		return Ident{}, err
	}
	p := s.live(pid)
	if p == nil {
		return Ident{}, fmt.Errorf("proc_pidinfo %d: %w", pid, ErrNoProcess)
	}
	return Ident{Pid: pid, UniqueID: p.uniq, PUniqueID: p.puniq, IDVersion: p.ver}, nil
}

func (s *sim) Pids() ([]int32, error) {
	s.enter("Pids")
	out := make([]int32, 0, len(s.procs))
	for pid := range s.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

func (s *sim) Signal(t AuditToken, sig unix.Signal) error {
	s.enter("Signal")
	if !s.symbol {
		return ErrNoTokenSignal
	}
	if s.onSignal != nil {
		s.onSignal(t)
	}
	if t.Pid() <= 0 { // proc_info.c: pid <= 0 is EINVAL
		return unix.EINVAL
	}
	p := s.live(t.Pid())
	if p == nil || p.ver != t.PidVersion() {
		return fmt.Errorf("proc_signal_with_audittoken: %w", ErrNoProcess)
	}
	if s.caller != 0 && s.caller != p.uid {
		return ErrPermission
	}
	s.delivered = append(s.delivered, delivery{uniq: p.uniq, pid: p.pid, sig: sig})
	s.deliver(p, sig)
	return nil
}

func (s *sim) CanSignal() error {
	if !s.symbol {
		return ErrNoTokenSignal
	}
	return nil
}

// Watcher.

func (s *sim) Attach(pid int32) error {
	s.enter("Attach")
	p := s.live(pid)
	if p == nil {
		return fmt.Errorf("kevent EVFILT_PROC %d: %w", pid, ErrNoProcess)
	}
	s.knotes[pid] = p.uniq
	return nil
}

func (s *sim) Detach(pid int32) error {
	delete(s.knotes, pid)
	return nil
}

func (s *sim) Wait(d time.Duration) ([]Note, error) {
	s.enter("Wait")
	if len(s.notes) == 0 {
		s.clock = s.clock.Add(d)
		return nil, nil
	}
	n := s.notes
	s.notes = nil
	return n, nil
}
