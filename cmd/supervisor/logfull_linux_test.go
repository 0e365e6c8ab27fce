package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationLogFeedFullSaysSo: a log feed whose file system is full
// drops its lines, counted; the operator learns it from the daemon's
// stderr and from status, text and JSON. Before, the count was in the JSON
// status only, and the daemon said nothing anywhere.
func TestIntegrationLogFeedFullSaysSo(t *testing.T) {
	testenv.RequireRoot(t)
	full := t.TempDir()
	if err := unix.Mount("tmpfs", full, "tmpfs", 0, "size=64k,mode=0755"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(full, unix.MNT_DETACH) })
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--log-output", "file:"+filepath.Join(full, "feed.json"), "--log-process-events")
	testenv.Eventually(t, time.Minute, func() bool {
		for range 20 {
			exec.Command("/bin/true").Run()
		}
		st, err := d.client.Status(context.Background())
		return err == nil && st.LogDropped > 0 && strings.Contains(st.LastLogError, "no space left")
	}, "the feed never reported a full file system")
	code, out, errs := d.run(t, nil, "status")
	if code != 0 || !strings.Contains(out, "log lines dropped ") || strings.Contains(out, "log lines dropped 0\n") || !strings.Contains(out, "no space left") {
		t.Errorf("status = %d %s\n%s\nwant the lines dropped and the feed's error", code, errs, out)
	}
	d.term()
	if s := d.stderr.String(); !strings.Contains(s, "supervisor: log feed: ") || !strings.Contains(s, "no space left") {
		t.Errorf("the daemon's stderr does not say its feed is dropping lines:\n%s", s)
	}
}
