package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// unitCaps returns the packaged unit's capability bounding set as
// setpriv's --bounding-set takes it: "-all,+bpf,+perfmon,...".
func unitCaps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../packaging/procsupervisor.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("procsupervisor.service: no CapabilityBoundingSet=")
	}
	set := "-all"
	for _, c := range strings.Fields(string(m[1])) {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	return set
}

// TestIntegrationUnitCapabilities: the daemon run as the packaged unit
// runs it (exactly its capability bounding set, no_new_privs, a mount and
// a UTS namespace of its own, as ProtectSystem= and ProtectHostname= give
// it) comes up on eBPF, launches for a user on the host and for the same
// user in a sandbox (a private mount namespace with a tmpfs over a
// directory, a private network), whose job keeps the sandbox's view after
// the sandbox has gone, and tears a grant down on release. The unit's
// capabilities were checked by hand before; joining a sandbox's
// namespaces added one (CAP_SYS_ADMIN, for setns).
func TestIntegrationUnitCapabilities(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "no %s (util-linux)", tool)
		}
	}
	wrap := []string{"unshare", "-m", "-u", "--propagation", "slave",
		"setpriv", "--bounding-set=" + unitCaps(t), "--inh-caps=-all", "--no-new-privs", "sh", "-c"}
	d, _ := startDaemonWith(t, nil, nil, wrap, "--socket-group", fmt.Sprint(nobody))
	if code, out, errs := d.run(t, nil, "status"); code != 0 || !strings.Contains(out, "ebpf") {
		t.Errorf("status under the unit's capabilities = exit %d %q %s; want mechanism ebpf", code, out, errs)
	}

	// ended waits for job id and returns how it ended and its output.
	ended := func(id string) (string, string) {
		t.Helper()
		_, how, _ := d.run(t, nil, "wait", "--timeout", "20s", id)
		_, output, _ := d.run(t, nil, "output", id)
		return strings.TrimSpace(how), output
	}
	// From the host.
	code, out := runIn(t, binary(t), d.sock, asNobody, &syscall.SysProcAttr{},
		"launch", "--detach", "--json", "--cwd", "/", "--", "sh", "-c", "echo from-the-host")
	var c struct{ ID string }
	if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil {
		t.Fatalf("nobody's launch from the host = exit %d %q", code, out)
	}
	if how, output := ended(c.ID); !strings.Contains(how, "exited (0)") || output != "from-the-host\n" {
		t.Errorf("nobody's job from the host: %s, output %q", how, output)
	}

	// From a sandbox that goes at once.
	hidden := filepath.Join(filepath.Dir(d.sock), "hidden")
	if err := os.Mkdir(hidden, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hidden, "f"), []byte("the-host's-view\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `mount -t tmpfs -o mode=0755 none "$1" && echo the-sandbox\'s-view >"$1/f" && exec setpriv --reuid=` +
		fmt.Sprint(nobody) + ` --regid=` + fmt.Sprint(nobody) + ` --clear-groups "$0" launch --detach --json --cwd / -- sh -c 'sleep 1; cat "$0/f"' "$1"`
	sandbox := exec.Command("unshare", "-m", "-n", "sh", "-c", script, binary(t), hidden)
	sandbox.Env = []string{"SUPERVISOR_SOCKET=" + d.sock, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	sandbox.Dir = "/"
	var errb bytes.Buffer
	sandbox.Stderr = &errb
	sout, err := sandbox.Output()
	if err != nil {
		t.Fatalf("nobody's launch from a sandbox under the unit's capabilities: %v: %s%s", err, sout, errb.String())
	}
	if err := json.Unmarshal(sout, &c); err != nil {
		t.Fatalf("%q: %v", sout, err)
	}
	if how, output := ended(c.ID); !strings.Contains(how, "exited (0)") || output != "the-sandbox's-view\n" {
		t.Errorf("nobody's job from a sandbox gone: %s, output %q; want the sandbox's view", how, output)
	}

	// A grant, torn down on release.
	g := launchAs(t, d, "sleep", "1000")
	if code, out, errs := d.run(t, asNobody, "release", "--grace", "0s", g.ID); code != 0 {
		t.Errorf("release of nobody's grant = exit %d %q %s", code, out, errs)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return !owned(g.Pid, g.Token) },
		"nobody's grant %s (pid %d) survived its release", g.ID, g.Pid)
}
