package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationBindToCallerGone: a launch --bind-to-caller whose caller
// exits at once (`launch ... &` and exit) is refused: the command was
// adopted by init, and before it bound the grant to pid 1, whose exit
// never comes, so the grant was never torn down with its caller. The
// daemon refuses init as a holder whoever names it; --holder names a
// caller for sure, and its exit tears the grant down.
func TestIntegrationBindToCallerGone(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	dir := t.TempDir()
	out, errf := filepath.Join(dir, "out"), filepath.Join(dir, "err")

	sh := exec.Command("sh", "-c", fmt.Sprintf("%q launch --json --bind-to-caller -- sleep 1000 > %q 2> %q & exit 0", binary(t), out, errf))
	sh.Env = append(os.Environ(), "SUPERVISOR_SOCKET="+d.sock)
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	var b, o []byte
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ = os.ReadFile(errf)
		o, _ = os.ReadFile(out)
		return bytes.HasSuffix(b, []byte("\n")) || bytes.HasSuffix(o, []byte("\n"))
	}, "the orphaned launch said nothing")
	if len(o) > 0 || !strings.Contains(string(b), "binding to the caller") {
		t.Errorf("launch --bind-to-caller from a caller gone: stdout %q, stderr %q; want a refusal", o, b)
	}
	if cs, err := d.client.List(context.Background()); err != nil || len(cs) != 0 {
		t.Errorf("claims after the refusal: %+v, %v; want none", cs, err)
	}

	// Named by an API caller: init is no holder.
	initTok, err := local.ReadToken(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.client.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "1000"}, Cwd: "/",
		Bind: true, Holder: &store.Instance{Pid: 1, Token: initTok}})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "init") {
		t.Errorf("launch bound to init = %v, want a conflict naming init", err)
	}

	// --holder: a process the caller names, by its token.
	holder := exec.Command("sleep", "1000")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	tok := tokenOf(t, holder.Process.Pid)
	c := d.launch(t, "--holder", fmt.Sprint(holder.Process.Pid), "--holder-token", tok, "--", "sleep", "1000")
	if c.Holder == nil || c.Holder.Pid != int32(holder.Process.Pid) || c.Holder.Token.String() != tok {
		t.Fatalf("launch --holder %d: holder %+v, want it with token %s", holder.Process.Pid, c.Holder, tok)
	}
	holder.Process.Kill()
	holder.Wait()
	if !testenv.Poll(10*time.Second, func() bool { return d.claim(t, c.ID).State == store.Released }) {
		t.Fatalf("grant of an exited --holder: state %s, want released", d.claim(t, c.ID).State)
	}
	if code, _, errs := d.run(t, nil, "launch", "--holder", "1", "--", "true"); code != exitUsage || !strings.Contains(errs, "--holder-token") {
		t.Errorf("--holder without --holder-token: exit %d, %q; want %d", code, errs, exitUsage)
	}
}
