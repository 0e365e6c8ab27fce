package xnu

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The simulated kernel's own rules: what the teardown is proven against
// must behave as the published source says.

func TestSimAllocatesSequentiallyAndSkipsHeldPids(t *testing.T) {
	s := newSim(110)
	launchd := s.procs[1]
	a := s.fork(launchd, "a")
	b := s.fork(launchd, "b")
	if a.pid != 100 || b.pid != 101 {
		t.Fatalf("first pids = %d, %d, want 100, 101", a.pid, b.pid)
	}
	s.setpgid(b) // pgid 101 stays while b lives
	c := s.fork(b, "c")
	s.exit(b)
	s.reap(b)
	for s.lastPid != 108 { // walk the allocator to just before the wrap
		x := s.fork(launchd, "x")
		s.exit(x)
		s.reap(x)
	}
	s.exit(a) // zombie: holds 100
	d := s.fork(launchd, "d")
	if d.pid != 109 {
		t.Fatalf("pid before the wrap = %d, want 109", d.pid)
	}
	e := s.fork(launchd, "e")
	// 100 is a zombie, 101 a process group (c's), 102 c itself.
	if e.pid != 103 {
		t.Errorf("after the wrap = %d, want 103 (100 zombie, 101 pgrp, 102 live skipped)", e.pid)
	}
	_ = c
}

func TestSimAdversarialAllocatorReissuesTheReapedPid(t *testing.T) {
	s := newSim(200)
	s.adversarial = true
	launchd := s.procs[1]
	a := s.fork(launchd, "a")
	s.fork(launchd, "b")
	s.exit(a)
	s.reap(a)
	if n := s.fork(launchd, "n"); n.pid != a.pid || n.uniq == a.uniq {
		t.Errorf("next fork = pid %d uniq %d, want pid %d with a new uniqueid", n.pid, n.uniq, a.pid)
	}
}

func TestSimIdentityRules(t *testing.T) {
	s := newSim(200)
	p := s.fork(s.procs[1], "p")
	c := s.fork(p, "c")
	if c.uniq <= p.uniq || c.ver == p.ver || c.puniq != p.uniq {
		t.Errorf("fork: child uniq %d ver %d puniq %d; parent uniq %d ver %d", c.uniq, c.ver, c.puniq, p.uniq, p.ver)
	}
	uniq, ver, start := c.uniq, c.ver, c.start
	s.exec(c, "c2")
	if c.uniq != uniq || c.ver == ver || c.start != start {
		t.Errorf("exec: uniq %d->%d, ver %d->%d, start %d->%d; want uniq and start kept, ver changed", uniq, c.uniq, ver, c.ver, start, c.start)
	}
	s.exit(p)
	if c.ppid != 1 || c.puniq != p.uniq {
		t.Errorf("reparent: ppid %d puniq %d, want 1 and %d", c.ppid, c.puniq, p.uniq)
	}
	if _, err := s.Identity(p.pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Identity(zombie) = %v, want ErrNoProcess", err)
	}
}

func TestSimKqueueAndSignalRules(t *testing.T) {
	s := newSim(200)
	p := s.fork(s.procs[1], "p")
	z := s.fork(s.procs[1], "z")
	s.exit(z)
	if err := s.Attach(z.pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Attach(zombie) = %v, want ErrNoProcess", err)
	}
	if err := s.kill(z.pid, unix.SIGKILL); err != nil {
		t.Errorf("kill(2) of a zombie = %v, want success (the zombie holds the pid)", err)
	}
	id, _ := s.Identity(p.pid)
	tok := id.AuditToken()
	if err := s.Signal(AuditToken{5: uint32(z.pid), 7: uint32(z.ver)}, unix.SIGTERM); !errors.Is(err, ErrNoProcess) {
		t.Errorf("token signal to a zombie = %v, want ErrNoProcess", err)
	}
	s.exec(p, "p2")
	if err := s.Signal(tok, unix.SIGSTOP); !errors.Is(err, ErrNoProcess) {
		t.Errorf("token signal after exec = %v, want ErrNoProcess (pid version changed)", err)
	}
	id, _ = s.Identity(p.pid)
	if err := s.Signal(id.AuditToken(), unix.SIGSTOP); err != nil || !p.stopped {
		t.Errorf("token signal with the new version = %v (stopped %v), want delivered", err, p.stopped)
	}
	s.caller = 501
	if err := s.Signal(id.AuditToken(), unix.SIGCONT); !errors.Is(err, ErrPermission) {
		t.Errorf("token signal from another uid = %v, want ErrPermission", err)
	}
	if id, _ := s.Identity(p.pid); id.StartMicro == 0 || id.HasCreds {
		t.Errorf("Identity for another uid = %+v, want flavor 17 and kern.proc (start, no creds)", id)
	}
}
