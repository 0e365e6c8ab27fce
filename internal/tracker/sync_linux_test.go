package tracker

import (
	"context"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationSync: a shell double-forks a sleeper and exits; once the
// shell's exit is seen by its parent, every record of it is in the eBPF
// ring (or the netlink socket), and after Sync the graph holds the
// sleeper, though the eBPF reader's poll would have found it only later.
// Several rounds, so that a Sync that waited for nothing is caught (with
// eBPF; netlink wakes its reader per message, and Sync must return, not
// time out, through its marker).
func TestIntegrationSync(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) { testSync(t, mech) })
	}
}

func testSync(t *testing.T, mech string) {
	tr, boot := start(t, mech)
	for round := range 10 {
		g := testenv.Orphan(t)
		tok := tokenOf(t, boot, g) // before Sync: the test's reads take no time off the poll
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := tr.Sync(ctx)
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
