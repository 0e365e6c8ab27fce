package testenv

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestIntegrationReissue kills a child and leaves it a zombie for a while,
// as init does with an adopted one: Reissue waits for the reap, and the
// stranger it starts holds the pid until Stop.
func TestIntegrationReissue(t *testing.T) {
	RequireRoot(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := int32(cmd.Process.Pid)
	cmd.Process.Kill()
	var reaped atomic.Bool
	late := time.AfterFunc(300*time.Millisecond, func() { cmd.Wait(); reaped.Store(true) })
	defer func() {
		if late.Stop() {
			cmd.Wait()
		}
	}()

	s, err := Reissue(t, pid)
	if err != nil {
		t.Fatalf("Reissue(%d) = %v", pid, err)
	}
	if !reaped.Load() {
		t.Error("Reissue returned before the old holder of the pid was reaped")
	}
	if s.Pid != pid {
		t.Errorf("Reissue(%d).Pid = %d", pid, s.Pid)
	}
	dir := "/proc/" + strconv.Itoa(int(pid))
	comm, err := os.ReadFile(dir + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "spawnat" {
		t.Errorf("pid %d after Reissue: comm %q, %v; want the helper's stranger", pid, comm, err)
	}
	s.Stop()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid %d still held after Stop: %v", pid, err)
	}
	s.Stop() // harmless
}

func TestIntegrationSpawnAtTaken(t *testing.T) {
	if _, err := SpawnAt(t, int32(os.Getpid())); !errors.Is(err, ErrPidTaken) {
		t.Errorf("SpawnAt(own pid) = %v, want ErrPidTaken", err)
	}
}
