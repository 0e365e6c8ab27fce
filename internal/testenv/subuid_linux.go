package testenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Subordinate runs the shell command inner as a subordinate uid, the way
// a rootless container runs: uid creator makes a user namespace (unshare
// -U), root maps its uid 0 to creator and its uid 1 to sub (as newuidmap
// does from /etc/subuid; gid 0 to creator and gid 1 to subGID), and the
// process takes uid and gid 1 there, sub and subGID here, before it execs
// sh -c inner. Its output goes to stdout. It
// returns the command, started, the process running inner (or about to);
// the test's cleanup kills it. It needs root, unshare and setpriv.
func Subordinate(t testing.TB, creator, sub, subGID uint32, inner string, stdout io.Writer) *exec.Cmd {
	t.Helper()
	RequireRoot(t)
	// The exec after the map gives sh, uid 0 in its namespace now, the
	// namespace's capabilities, which setpriv needs to take uid 1.
	cmd := exec.Command("unshare", "-U", "sh", "-c",
		`read go; exec setpriv --reuid=1 --regid=1 --clear-groups sh -c "$0"`, inner)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: creator, Gid: creator}}
	cmd.Stdout = stdout
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		Skip(t, "unshare -U as uid %d: %v", creator, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return strings.TrimSpace(string(b)) == "sh"
	}, "unshare never ran sh")
	for f, id := range map[string]uint32{"uid_map": sub, "gid_map": subGID} {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/%s", pid, f), fmt.Appendf(nil, "0 %d 1\n1 %d 1\n", creator, id), 0); err != nil {
			t.Fatalf("%s of %d: %v", f, pid, err)
		}
	}
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	in.Close()
	return cmd
}
