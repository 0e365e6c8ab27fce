package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationLaunchCallersLoginUID: a job has its caller's audit login
// uid, not the daemon's. The daemon's, unset under systemd, let a job set
// its own to root's (a process with none may set it once, unprivileged),
// and its audit records then named root where the caller's named the user.
func TestIntegrationLaunchCallersLoginUID(t *testing.T) {
	if _, err := os.Stat("/proc/self/loginuid"); err != nil {
		testenv.Skip(t, "no audit login uid here: %v", err)
	}
	h := newHarness(t)
	// The caller: root sets its login uid, as a login would, then becomes
	// nobody's sleep.
	pid := startCaller(t, exec.Command("/bin/sh", "-c", "echo 4242 > /proc/self/loginuid && exec setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sleep 600"))
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/loginuid", pid)); strings.TrimSpace(string(b)) != "4242" {
		t.Fatalf("the caller's login uid is %q, want 4242", b)
	}
	p := api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)}
	cl := launchSleeper(t, h, p, "/bin/sleep", "600")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/loginuid", cl.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "4242" {
		t.Errorf("the job's login uid is %s, want its caller's 4242", got)
	}
}
