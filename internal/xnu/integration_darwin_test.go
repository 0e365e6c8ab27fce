package xnu

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// These run on a real Mac only (scripts/macos-check.sh runs them with
// SUPERVISOR_REQUIRE_PRIVILEGED=1, which turns a skip into a failure). They
// confirm on the real kernel what sim_test.go assumes. They were
// cross-compiled, never run, where this package was written.

func needTokenSignal(t *testing.T, s *System) {
	t.Helper()
	if err := s.CanSignal(); err != nil {
		testenv.Skip(t, "%v", err)
	}
}

// shell starts sh -c script with a stdin pipe and returns the first line
// it prints as a pid (or 0 when it prints none).
func shell(t *testing.T, script string, wantPid bool) (*exec.Cmd, io.WriteCloser, int32) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	var pid int32
	if wantPid {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		p, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("script printed %q", line)
		}
		pid = int32(p)
	}
	return cmd, in, pid
}

func TestIntegrationTokenSignalThenESRCH(t *testing.T) {
	s := NewSystem()
	needTokenSignal(t, s)
	cmd := testenv.Start(t, "sleep", "300")
	pid := int32(cmd.Process.Pid)
	id, err := s.Identity(pid)
	if err != nil || id.UniqueID == 0 || id.StartMicro == 0 || !id.HasCreds {
		t.Fatalf("Identity(%d) = %+v, %v, want flavor 18 with uniqueid and start", pid, id, err)
	}
	if err := s.Signal(id.AuditToken(), unix.SIGKILL); err != nil {
		t.Fatalf("Signal = %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := s.Identity(pid)
		return errors.Is(err, ErrNoProcess)
	}, "process %d still answers after SIGKILL", pid)
	// A zombie now (not reaped): the token must not reach it.
	if err := s.Signal(id.AuditToken(), unix.SIGKILL); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Signal to the zombie = %v, want ErrNoProcess", err)
	}
	q, err := NewKqueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Attach(pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("kqueue Attach to the zombie = %v, want ErrNoProcess", err)
	}
	_ = cmd.Wait()
	if err := s.Signal(id.AuditToken(), unix.SIGKILL); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Signal after reaping = %v, want ErrNoProcess", err)
	}
}

func TestIntegrationExecKeepsUniqueIDChangesVersion(t *testing.T) {
	s := NewSystem()
	needTokenSignal(t, s)
	cmd, in, _ := shell(t, "read x; exec sleep 300", false)
	pid := int32(cmd.Process.Pid)
	before, err := s.Identity(pid)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = in.Write([]byte("go\n"))
	var after Ident
	testenv.Eventually(t, 10*time.Second, func() bool {
		after, err = s.Identity(pid)
		return err == nil && after.IDVersion != before.IDVersion
	}, "pid version of %d did not change across exec", pid)
	if after.UniqueID != before.UniqueID || after.StartMicro != before.StartMicro {
		t.Errorf("exec: uniqueid %d->%d start %d->%d, want both kept", before.UniqueID, after.UniqueID, before.StartMicro, after.StartMicro)
	}
	if err := s.Signal(before.AuditToken(), unix.SIGKILL); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Signal with the pre-exec token = %v, want ErrNoProcess", err)
	}
	if err := s.Signal(after.AuditToken(), unix.SIGKILL); err != nil {
		t.Errorf("Signal with the post-exec token = %v", err)
	}
}

func TestIntegrationPUniqueIDSurvivesReparenting(t *testing.T) {
	s := NewSystem()
	needTokenSignal(t, s)
	cmd, in, child := shell(t, "sleep 300 & echo $!; read x", true)
	parent, err := s.Identity(int32(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = in.Write([]byte("go\n"))
	_ = cmd.Wait()
	var id Ident
	testenv.Eventually(t, 10*time.Second, func() bool {
		id, err = s.Identity(child)
		return err == nil && id.PPid == 1
	}, "child %d was not reparented to launchd", child)
	if id.PUniqueID != parent.UniqueID {
		t.Errorf("puniqueid after reparenting = %d, want the exited parent's %d", id.PUniqueID, parent.UniqueID)
	}
	l := NewGoneLineage(s, parent.UniqueID)
	if _, err := l.Scan(); err != nil || !l.Recorded(id.UniqueID) {
		t.Errorf("lineage of the exited parent: recorded %v (%v), want the reparented child", l.Recorded(id.UniqueID), err)
	}
	if err := s.Signal(id.AuditToken(), unix.SIGKILL); err != nil {
		t.Errorf("Signal = %v", err)
	}
}

func TestIntegrationFlavor17ForAnotherUID(t *testing.T) {
	if unix.Geteuid() == 0 {
		t.Skip("as root flavor 18 answers for every uid")
	}
	id, err := NewSystem().Identity(1)
	if err != nil || id.UniqueID != 1 || id.HasCreds || id.StartMicro == 0 {
		t.Errorf("Identity(launchd) = %+v, %v, want uniqueid 1 from flavor 17 and a start time from kern.proc", id, err)
	}
}
