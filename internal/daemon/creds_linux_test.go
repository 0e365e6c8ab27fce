package daemon

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationCallerLimitsOnlyItsOwn: the workload's limits are read
// from the caller only while it is the user alone. A caller that became a
// setuid program, which keeps root as its saved uid and may raise its
// limits (sudo does before it asks for a password), is refused (409):
// before, a real or effective uid of the user's was enough, and the
// daemon took such a program's limits for the user's.
func TestIntegrationCallerLimitsOnlyItsOwn(t *testing.T) {
	h := newHarness(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	tests := []struct {
		name string
		half bool
		want error
	}{
		{"the user alone", false, nil},
		{"a setuid program keeping root saved", true, api.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pid int
			if tt.half {
				pid = testenv.HalfSetuid(t, nobody)
			} else {
				caller := exec.Command("/bin/sleep", "600")
				caller.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
				if err := caller.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { caller.Process.Kill(); caller.Wait() })
				pid = caller.Process.Pid
			}
			p := api.Peer{UID: 65534, GID: 65534, Pid: int32(pid)}
			cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("launch for a caller that is %s = %+v, %v; want %v", tt.name, cl, err, tt.want)
			}
		})
	}
}
