package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationStoreMovedAway: a daemon whose claims.db was moved away
// while it was stopped refuses to start (exit 70), saying what to do; it
// started with an empty store, "reconciled 0 claims", its jobs running
// on unmanaged. With the file back it starts.
func TestIntegrationStoreMovedAway(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	if code, out, errs := d.run(t, nil, "launch", "--detach", "/bin/true"); code != 0 {
		t.Fatalf("launch: exit %d, %s %s", code, out, errs)
	}
	d.term()
	db := filepath.Join(state, "claims.db")
	if err := os.Rename(db, db+".elsewhere"); err != nil {
		t.Fatal(err)
	}
	code, _, errs := d.run(t, nil, "run", "--state-dir", state, "--socket", sock, "--log-output", "file:/dev/null")
	if code != 70 || !strings.Contains(errs, "missing") || !strings.Contains(errs, "claims.db.lock") || !strings.Contains(errs, "put the file back") {
		t.Fatalf("daemon with its store moved away: exit %d, stderr %q; want 70 and what to do", code, errs)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a new store was made: %v", err)
	}
	if err := os.Rename(db+".elsewhere", db); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, state, sock)
	d.term()
}
