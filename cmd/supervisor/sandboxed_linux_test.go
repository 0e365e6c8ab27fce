package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationSandboxedCallers: with sandboxed_callers refuse, a
// caller but root with no_new_privs, or in a user namespace of its own,
// is answered status alone; without it (the default), and for a caller
// with neither, it is served. Such a caller may be confined by Landlock
// or an LSM, which a job does not carry: a review's Landlock-confined
// caller wrote, through a job, where it could not.
func TestIntegrationSandboxedCallers(t *testing.T) {
	testenv.RequireRoot(t)
	// as runs the CLI as nobody, through setpriv with the extra options.
	as := func(d *testDaemon, wrap []string, args ...string) (int, string) {
		argv := append([]string{"--reuid", fmt.Sprint(nobody), "--regid", fmt.Sprint(nobody), "--clear-groups"}, wrap...)
		cmd := exec.Command("setpriv", append(append(argv, binary(t)), args...)...)
		cmd.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
		cmd.Dir = "/"
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}
	plain := []string{}
	nnp := []string{"--no-new-privs"}
	userns := []string{"unshare", "--user"}
	if err := exec.Command("unshare", "--user", "true").Run(); err != nil {
		userns = nil // no unprivileged user namespaces here
	}
	tests := []struct {
		name   string
		policy string // sandboxed_callers
		wrap   []string
		served bool
	}{
		{"refuse, plain caller", "refuse", plain, true},
		{"refuse, no_new_privs", "refuse", nnp, false},
		{"refuse, own user namespace", "refuse", userns, false},
		{"serve, no_new_privs", "serve", nnp, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wrap == nil {
				testenv.Skip(t, "unshare --user fails here")
			}
			state, sock := newDirs(t)
			d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody), "--cgroup", "off", "--sandboxed-callers", tt.policy)
			code, out := as(d, tt.wrap, "launch", "--cwd", "/", "--", "sleep", "1000")
			if tt.served && code != 0 {
				t.Fatalf("launch as a %s caller: exit %d: %s", tt.name, code, out)
			}
			if !tt.served && (code == 0 || !strings.Contains(out, "sandboxed_callers")) {
				t.Fatalf("launch as a %s caller: exit %d: %s; want refused, naming sandboxed_callers", tt.name, code, out)
			}
			if code, out := as(d, tt.wrap, "status"); code != 0 {
				t.Errorf("status as a %s caller: exit %d: %s; want it answered", tt.name, code, out)
			}
			d.releaseAll(t)
		})
	}
}
