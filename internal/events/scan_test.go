package events

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

func TestScanLiveProcesses(t *testing.T) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		testenv.Skip(t, "no /proc: %v", err)
	}
	// A zombie child: exited, not reaped.
	z := exec.Command("true")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	defer z.Wait()
	r := procfs.NewReader("/proc")
	var st procfs.Stat
	testenv.Eventually(t, 5*time.Second, func() bool { return r.ReadStat(int32(z.Process.Pid), &st) == nil && st.Zombie() },
		"child %d never became a zombie", z.Process.Pid)
	procs, err := Scan("/proc", boot)
	if err != nil {
		t.Fatalf("Scan = %v", err)
	}
	var self *Proc
	for i := range procs {
		switch procs[i].Pid {
		case int32(os.Getpid()):
			self = &procs[i]
		case int32(z.Process.Pid):
			t.Errorf("Scan listed the zombie %d", z.Process.Pid)
		}
	}
	if self == nil {
		t.Fatal("Scan did not list the test process")
	}
	if err := r.ReadStat(int32(os.Getpid()), &st); err != nil {
		t.Fatal(err)
	}
	if self.PPid != int32(os.Getppid()) || self.Token.Start != st.StartTime || self.Token.Boot != boot {
		t.Errorf("Scan(self) = %+v, want ppid %d, start %d", self, os.Getppid(), st.StartTime)
	}
	if self.ParentToken.IsZero() {
		t.Error("Scan(self) has no parent token")
	}
}
