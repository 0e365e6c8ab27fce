package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func TestReadTokenAndJudge(t *testing.T) {
	ctx := context.Background()
	self := int32(os.Getpid())
	tok, err := ReadToken(ctx, self)
	if err != nil {
		t.Fatalf("ReadToken(self) = %v", err)
	}
	if v, err := Judge(ctx, "", self, tok); err != nil || v.Result != verdict.Owned {
		t.Errorf("Judge(self) = %v, %v, want OWNED", v, err)
	}
	if _, err := Judge(ctx, "nonsense", self, tok); !errors.Is(err, tracker.ErrUnknownMechanism) {
		t.Errorf("Judge with an unknown mechanism = %v, want ErrUnknownMechanism", err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(ctx, int32(gone.Process.Pid)); !errors.Is(err, ErrNoProcess) {
		t.Errorf("ReadToken(reaped child) = %v, want ErrNoProcess", err)
	}
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		if tid, _ := strconv.Atoi(e.Name()); tid != 0 && int32(tid) != self {
			if _, err := ReadToken(ctx, int32(tid)); !errors.Is(err, ErrNotProcess) || !strings.Contains(err.Error(), "thread") {
				t.Errorf("ReadToken(thread %d) = %v, want ErrNotProcess saying why", tid, err)
			}
			break
		}
	}
}

// TestIntegrationKillProtects: a local teardown never signals the pids it
// is told to protect (the running daemon) nor their ancestors; the rest of
// the tree goes.
func TestIntegrationKillProtects(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	tree := func() (*exec.Cmd, []int32) {
		return testenv.Shell(t, "sleep 60 & echo $!; sleep 60 & echo $!; wait", 2)
	}

	// A protected pid outside the tree changes nothing.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	cmd, kids := tree()
	root := int32(cmd.Process.Pid)
	tok, err := ReadToken(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Kill(ctx, "auto", root, tok, actions.Options{Grace: 200 * time.Millisecond, Protected: []int32{int32(other.Process.Pid)}})
	if err != nil || !out.Acted || !out.Dead {
		t.Errorf("Kill = %+v, %v, want the tree torn down", out, err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return gone(kids[0]) && gone(kids[1]) }, "members %v survived", kids)
	if syscall.Kill(other.Process.Pid, 0) != nil {
		t.Error("the protected process outside the tree was signalled")
	}

	// The root is the ancestor of a protected pid (the daemon started from
	// a shell): refused outright, nothing signalled.
	cmd, kids = tree()
	root = int32(cmd.Process.Pid)
	if tok, err = ReadToken(ctx, root); err != nil {
		t.Fatal(err)
	}
	out, err = Kill(ctx, "auto", root, tok, actions.Options{Grace: 200 * time.Millisecond, Protected: []int32{kids[1]}})
	if err != nil || out.Acted || !strings.Contains(out.Error, "protected") {
		t.Errorf("Kill of a protected pid's parent = %+v, %v, want a refusal", out, err)
	}
	if gone(root) || gone(kids[0]) || gone(kids[1]) {
		t.Error("a process of the refused tree was signalled")
	}
}

func gone(pid int32) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
	return err != nil || strings.Contains(string(b), ") Z ")
}
