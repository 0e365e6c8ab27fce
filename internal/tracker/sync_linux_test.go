package tracker

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIntegrationSync: a shell double-forks a sleeper and exits; once the
// shell's exit is seen by its parent, every record of it is in the eBPF
// ring, and after Sync the graph holds the sleeper, born of the shell's
// subshell, though the reader's poll would have found it only later.
// Several rounds, so that a Sync that waited for nothing is caught.
func TestIntegrationSync(t *testing.T) {
	tr, boot := start(t, "ebpf")
	for round := range 10 {
		out, err := exec.Command("sh", "-c", `(sleep 60 >/dev/null 2>&1 & echo $!)`).Output()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("sleeper pid %q: %v", out, err)
		}
		g := int32(n)
		t.Cleanup(func() { syscall.Kill(int(g), syscall.SIGKILL) })
		tok := tokenOf(t, boot, g) // before Sync: the test's reads take no time off the poll
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = tr.Sync(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Sync() = %v", round, err)
		}
		node, ok := tr.Graph().Live(g)
		if !ok || node.Token != tok {
			t.Fatalf("round %d: after Sync the graph holds %+v (found %v) for sleeper %d, want its instance %s", round, node, ok, g, tok)
		}
	}
}

// TestSyncStopped: Sync on a stopped tracker fails at once instead of
// waiting for a reader that is gone.
func TestSyncStopped(t *testing.T) {
	tr, _ := start(t, "ebpf")
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Sync(ctx); err != nil && ctx.Err() != nil {
		t.Fatalf("Sync on a stopped tracker waited for its context: %v", err)
	}
}
