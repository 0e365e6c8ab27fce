package main

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationPrivateSocket: the daemon listens on a private socket
// beside its API socket, mode 0600 and its own, which root's client uses:
// with the API socket's name gone, root is still served, and nobody,
// which other users' connect floods on the shared socket cannot reach,
// cannot connect to it.
func TestIntegrationPrivateSocket(t *testing.T) {
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", "65534")
	priv := api.PrivateSocket(sock)
	fi, err := os.Lstat(priv)
	if err != nil {
		t.Fatalf("private socket: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 || st.Uid != 0 {
		t.Errorf("private socket %s: mode %v, uid %d; want a socket, 0600, root's", priv, fi.Mode(), st.Uid)
	}
	// nobody reaches the API socket (its group) but not the private one.
	code, _, errs := d.run(t, asNobody, "status")
	if code != 0 {
		t.Fatalf("status as nobody on the API socket: exit %d %s", code, errs)
	}
	probe := testenv.SelfAs(t, asNobody, []string{dialEnv + "=" + priv}, "-test.run=^$")
	if out, err := probe.CombinedOutput(); err == nil || !strings.Contains(string(out), "permission denied") {
		t.Errorf("nobody's connect to the private socket: %v %s, want permission denied", err, out)
	}
	// Root's client goes to the private socket first.
	link := sock + ".moved"
	if err := os.Rename(sock, link); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(link, sock)
	c := api.NewClient(sock)
	defer c.Close()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("root's status with the API socket's name gone = %v, want served on the private socket", err)
	}
	// A clean stop leaves neither socket behind (the private one stayed).
	os.Rename(link, sock)
	d.term()
	for _, p := range []string{sock, priv} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("after a clean stop %s: %v, want it gone", p, err)
		}
	}
}

// dialEnv makes the test binary connect to the socket it names and exit:
// 0 when it connected, 1 with the error.
const dialEnv = "SUPERVISOR_TEST_DIAL"

func init() {
	p := os.Getenv(dialEnv)
	if p == "" {
		return
	}
	c, err := net.Dial("unix", p)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	c.Close()
	os.Exit(0)
}
