package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var freezes atomic.Int32

// Freeze puts pid in a cgroup v1 freezer group of its own and freezes it:
// signals, SIGKILL included, wait until it is thawed. It returns thaw;
// cleanup thaws too and removes the group once its member has gone (the
// test kills it). It skips (fails in CI) without a freezer hierarchy.
func Freeze(t testing.TB, pid int32) (thaw func()) {
	t.Helper()
	RequireRoot(t)
	root := cgroupV1(t, "freezer")
	dir := filepath.Join(root, fmt.Sprintf("supervisor-test-%d-%d", os.Getpid(), freezes.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(f, s string) error { return os.WriteFile(filepath.Join(dir, f), []byte(s), 0) }
	thaw = func() {
		if err := write("freezer.state", "THAWED"); err != nil {
			t.Errorf("thaw %s: %v", dir, err)
		}
	}
	t.Cleanup(func() {
		write("freezer.state", "THAWED")
		var err error
		if !Poll(5*time.Second, func() bool { err = os.Remove(dir); return err == nil }) {
			t.Errorf("freezer group %s left behind: %v", dir, err)
		}
	})
	if err := write("cgroup.procs", strconv.Itoa(int(pid))); err != nil {
		t.Fatal(err)
	}
	if err := write("freezer.state", "FROZEN"); err != nil {
		t.Fatal(err)
	}
	return thaw
}

// cgroupV1 finds a cgroup v1 hierarchy with the controller in mountinfo.
func cgroupV1(t testing.TB, controller string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, pf := strings.Fields(pre), strings.Fields(post)
		if len(f) > 4 && len(pf) > 2 && pf[0] == "cgroup" && slices.Contains(strings.Split(pf[2], ","), controller) {
			return f[4]
		}
	}
	Skip(t, "no cgroup v1 %s hierarchy mounted", controller)
	return ""
}
