package userns

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

const (
	creator = 4321   // the user who makes the namespace
	subUID  = 200000 // what newuidmap would give it from /etc/subuid
)

// subordinate runs sleep as uid subUID in a user namespace uid creator
// made (testenv.Subordinate), directly or, nested, one namespace further
// down, and returns its pid once it runs.
func subordinate(t *testing.T, nested bool) int32 {
	t.Helper()
	inner := "exec sleep 60"
	if nested {
		inner = "exec unshare -U sleep 60"
	}
	pid := int32(testenv.Subordinate(t, creator, subUID, subUID, inner, nil).Process.Pid)
	testenv.Eventually(t, 10*time.Second, func() bool {
		ids, err := procfs.ReadUIDs("/proc", pid)
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return err == nil && ids.Real == subUID && strings.TrimSpace(string(b)) == "sleep"
	}, "the process never became uid %d running sleep", subUID)
	return pid
}

func account(t *testing.T, pid int32, uid uint32) uint32 {
	t.Helper()
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	got, err := Account(fd, pid, uid)
	if err != nil {
		t.Fatalf("Account(%d): %v", pid, err)
	}
	return got
}

// TestIntegrationSubordinateUIDIsItsCreators: a process running as a
// subordinate uid in a namespace a user made, directly or one namespace
// further down, draws on that user's share.
func TestIntegrationSubordinateUIDIsItsCreators(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) {
			pid := subordinate(t, nested)
			if got := account(t, pid, subUID); got != creator {
				t.Errorf("Account of uid %d in a namespace uid %d made = %d, want %d", subUID, creator, got, creator)
			}
			// The same through /proc, as on kernels before 6.11.
			fd, err := unix.PidfdOpen(int(pid), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			viaIoctl, err := userNamespace(fd, pid)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(viaIoctl)
			viaProc, err := procUserNamespace(fd, pid)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(viaProc)
			a, _ := inode(viaIoctl)
			b, _ := inode(viaProc)
			if a != b || a == 0 {
				t.Errorf("user namespace by pidfd %d, by /proc %d", a, b)
			}
		})
	}
}

// TestIntegrationOwnAndRootsNamespaces: a process in the daemon's own
// namespace, or in one root made, draws on its own uid's share.
func TestIntegrationOwnAndRootsNamespaces(t *testing.T) {
	testenv.RequireRoot(t)
	if got := account(t, int32(os.Getpid()), 1234); got != 1234 {
		t.Errorf("Account(own process, uid 1234) = %d, want 1234", got)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: subUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: subUID, Size: 1}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if got := account(t, int32(cmd.Process.Pid), subUID); got != subUID {
		t.Errorf("Account of uid %d in a namespace root made = %d, want %d", subUID, got, subUID)
	}
}
