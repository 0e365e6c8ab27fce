package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/jobout"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

const nobodyID = 65534

// linkedJobOutput makes claim c's output file as a launch does (root's,
// nobody given it by an ACL entry, or chowned where the filesystem keeps
// none) and has a job of nobody's, the file its stdout, link it into a
// directory of nobody's, as `ln -L /proc/self/fd/1` does. It returns the
// file, open as the job's stdout is, and the link.
func linkedJobOutput(t *testing.T, h *harness, c *store.Claim) (*os.File, string) {
	t.Helper()
	jobs := filepath.Join(h.d.cfg.StateDir, "jobs")
	if err := os.MkdirAll(jobs, 0o711); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	if err := os.Chown(base, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(jobs, c.ID+".out")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := jobout.GiveTo(int(f.Fd()), nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	if err := h.st.Update(c.ID, func(x *store.Claim) error { x.OutputPath = path; return nil }); err != nil {
		t.Fatal(err)
	}
	*c, _ = h.st.Get(c.ID)
	stolen := filepath.Join(base, "stolen")
	var stderr strings.Builder
	job := exec.Command("/bin/sh", "-c", `ln -L /proc/self/fd/1 "$1"`, "sh", stolen)
	job.Stdout, job.Stderr = f, &stderr
	job.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
	if err := job.Run(); err != nil {
		t.Fatalf("the job's link: %v: %s", err, stderr.String())
	}
	return f, stolen
}

// nobodyOpens reports whether nobody may open the file at path for
// reading or for appending (setpriv, as a user's shell would).
func nobodyOpens(t *testing.T, path string) (read, write bool) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Skip(t, "no setpriv: %v", err)
	}
	try := func(redir string) bool {
		return exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
			"/bin/sh", "-c", "true "+redir+` "$1"`, "sh", path).Run() == nil
	}
	return try("<"), try(">>")
}

// TestDropTakesOutputBack: a finished job's output file that its job
// linked out of STATE_DIR/jobs is, once the claim is dropped, an empty
// file no user may open by the link. Before, drop emptied and unlinked
// it, and the link stayed a root-owned file its user could write without
// bound.
func TestDropTakesOutputBack(t *testing.T) {
	h := newHarness(t)
	c := store.Claim{Kind: store.Job, State: store.Exited, UID: nobodyID}
	if err := h.st.Put(&c); err != nil {
		t.Fatal(err)
	}
	f, stolen := linkedJobOutput(t, h, &c)
	if _, err := f.Write([]byte("the job's output\n")); err != nil {
		t.Fatal(err)
	}
	if r, w := nobodyOpens(t, stolen); !r || !w {
		t.Fatalf("before the drop nobody opens the link for reading %v, writing %v; want both", r, w)
	}
	h.d.drop(c)
	if r, w := nobodyOpens(t, stolen); r || w {
		t.Errorf("after the drop nobody opens the link for reading %v, writing %v; want neither", r, w)
	}
	if fi, err := os.Stat(stolen); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0 {
		t.Errorf("the link after the drop: %v, %v; want an empty file, mode 0", fi.Mode(), err)
	}
	if _, err := os.Lstat(c.OutputPath); !os.IsNotExist(err) {
		t.Errorf("the output's name outlived its claim: %v", err)
	}
}

// TestBoundTakesLinkedOutputBack: the bound's watch, finding a running
// job's output linked elsewhere when the job writes, takes the file back
// from its user and logs a job_output_bounded line for the claim once;
// the job's descriptor writes on, into a file still bounded.
func TestBoundTakesLinkedOutputBack(t *testing.T) {
	h := newHarness(t)
	h.d.cfg.JobOutputMax = 1 << 20
	c := store.Claim{Kind: store.Job, State: store.Running, UID: nobodyID}
	if err := h.st.Put(&c); err != nil {
		t.Fatal(err)
	}
	f, stolen := linkedJobOutput(t, h, &c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.d.boundJobOutputs(ctx)
	block := make([]byte, 64<<10)
	testenv.Eventually(t, 5*time.Second, func() bool {
		f.Write(block) // as the job writes on: the watch hears it by the directory's name
		r, w := nobodyOpens(t, stolen)
		return !r && !w
	}, "nobody still opens the job's output by its link")
	for range 64 {
		if _, err := f.Write(block); err != nil {
			t.Fatalf("the job's descriptor after the take-back: %v", err)
		}
	}
	var st unix.Stat_t
	testenv.Eventually(t, 5*time.Second, func() bool {
		f.Write(block[:1])
		return unix.Stat(stolen, &st) == nil && st.Blocks*512 <= h.d.cfg.JobOutputMax+jobout.Slack+64<<10
	}, "the taken-back file is not held to its bound")
	cancel()
	h.lg.Flush(context.Background())
	n := 0
	for _, l := range h.lines(t) {
		ev, _ := l["event"].(map[string]any)
		if reason, _ := ev["reason"].(string); ev["action"] == "job_output_bounded" && strings.Contains(reason, "linked outside") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d job_output_bounded lines tell of the link, want 1", n)
	}
}
