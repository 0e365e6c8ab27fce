package spawn

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationShimDropsInheritable: a workload of another uid has no
// inheritable (nor ambient) capability, whatever the forking thread of the
// daemon had: the shim clears them before it takes the uid. With
// CAP_NET_RAW inheritable on the thread that starts it, the workload
// reported it in CapInh, and a file with cap_net_raw+ei would have held
// it after the exec.
func TestIntegrationShimDropsInheritable(t *testing.T) {
	out := fromThread(t, func() error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return err
		}
		data[0].Inheritable |= 1 << unix.CAP_NET_RAW
		return unix.Capset(&hdr, &data[0])
	}, Spec{Argv: []string{"grep", "-E", "^Cap(Inh|Amb):", "/proc/self/status"}})
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || strings.Trim(f[1], "0") != "" {
			t.Errorf("workload of uid %d: %q, want no capability", nobody, l)
		}
	}
	if !strings.Contains(out, "CapInh:") {
		t.Errorf("workload said %q, want its CapInh", out)
	}
}

// TestIntegrationShimLoginUID: the workload has the spec's audit login
// uid (the caller's), not the one it would have from the daemon.
func TestIntegrationShimLoginUID(t *testing.T) {
	if _, err := os.Stat("/proc/self/loginuid"); err != nil {
		testenv.Skip(t, "no audit login uid here: %v", err)
	}
	for _, u := range []uint32{1234, 4321} {
		lu := u
		_, out, ws, err := startSpec(t, Spec{Argv: []string{"cat", "/proc/self/loginuid"}, LoginUID: &lu}, "/")
		if err != nil || ws.ExitStatus() != 0 {
			t.Fatalf("workload: %v, %v, output %q", err, ws, out)
		}
		if want := strconv.FormatUint(uint64(u), 10); strings.TrimSpace(out) != want {
			t.Errorf("workload's login uid %q, want the caller's %s", out, want)
		}
	}
}
