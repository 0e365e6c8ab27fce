package jobout

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// asUnit runs f on a thread of its own whose effective capabilities lack
// CAP_DAC_OVERRIDE and CAP_FOWNER, as the packaged unit's do
// (packaging/procsupervisor.service). The thread ends with f.
func asUnit(t *testing.T, f func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_FOWNER
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// nobodyMay runs a shell as nobody and says what it may do to the file at
// path: "read", "write" and "link" (a new hard link beside it), those it
// may, in that order.
func nobodyMay(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `exec 2>/dev/null
		if true <"$1"; then echo read; fi
		if true >>"$1"; then echo write; fi
		if ln "$1" "$1.again"; then echo link; rm -f "$1.again"; fi`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nobody's shell: %v", err)
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// TestTakeBack: a job's output file that its job, as nobody, hard-linked
// out of the daemon's directory (ln -L /proc/self/fd/1, which the kernel
// allows a user who may read and write the file) is dead to nobody by that
// link once the daemon gives the file up (Discard) or once the bound finds
// the link (Bound), whether the file was given by an ACL entry or, where
// the filesystem keeps no ACLs, by a chown; all under the packaged unit's
// capabilities. Before, the link stayed writable by nobody: outside the
// directory no bound reached it, and root's, no quota of nobody's.
func TestTakeBack(t *testing.T) {
	testenv.RequireRoot(t)
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	jobs := filepath.Join(base, "jobs")
	away := filepath.Join(base, "away") // nobody's own directory
	if err := os.Mkdir(jobs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(away, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(away, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	gives := []struct {
		name string
		give func(fd int) error
	}{
		{"ACL", func(fd int) error {
			acl, err := GiveTo(fd, nobody, nobody)
			if err == nil && !acl {
				err = errors.New("no ACL on this filesystem")
			}
			return err
		}},
		{"chown, without ACLs", func(fd int) error { return unix.Fchown(fd, nobody, nobody) }},
	}
	const limit = 1 << 20
	acts := []struct {
		name string
		act  func(path string, job *os.File) error
		gone bool // the name in the directory is removed
	}{
		{"Discard", func(path string, _ *os.File) error { return Discard(path) }, true},
		{"Bound, within its bound", func(path string, _ *os.File) error {
			r, err := Bound(path, limit)
			if err == nil && (!r.Escaped || r.UpTo != 0) {
				err = fmt.Errorf("Bound = %+v, want escaped, nothing dropped", r)
			}
			return err
		}, false},
		{"Bound, past its bound", func(path string, job *os.File) error {
			if _, err := job.Write(pattern(4 * limit)); err != nil {
				return err
			}
			r, err := Bound(path, limit)
			if err == nil && (!r.Escaped || r.UpTo == 0) {
				err = fmt.Errorf("Bound = %+v, want escaped and bytes dropped", r)
			}
			return err
		}, false},
	}
	for _, g := range gives {
		for _, a := range acts {
			name := g.name + "/" + a.name
			t.Run(name, func(t *testing.T) {
				id := strings.NewReplacer(" ", "_", "/", "_", ",", "").Replace(name)
				path := filepath.Join(jobs, id+".out")
				stolen := filepath.Join(away, id)
				f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := g.give(int(f.Fd())); err != nil {
					t.Fatal(err)
				}
				// The job: its stdout the file, as launch gives it.
				var stderr strings.Builder
				job := exec.Command("/bin/sh", "-c", `ln -L /proc/self/fd/1 "$1"`, "sh", stolen)
				job.Stdout, job.Stderr = f, &stderr
				job.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
				if err := job.Run(); err != nil {
					t.Fatalf("the job's link: %v: %s", err, stderr.String())
				}
				if got := nobodyMay(t, stolen); got != "read write link" {
					t.Fatalf("before: nobody may %q by the link, want all", got)
				}
				var aerr error
				asUnit(t, func() { aerr = a.act(path, f) })
				if aerr != nil {
					t.Fatalf("%s: %v", a.name, aerr)
				}
				if got := nobodyMay(t, stolen); got != "" {
					t.Errorf("after %s: nobody may %q by the link, want nothing", a.name, got)
				}
				var st unix.Stat_t
				if err := unix.Lstat(stolen, &st); err != nil {
					t.Fatal(err)
				}
				if st.Uid != 0 || st.Gid != 0 || st.Mode&0o7777 != 0 {
					t.Errorf("after %s: the file is %d:%d mode %o, want root's, mode 0", a.name, st.Uid, st.Gid, st.Mode&0o7777)
				}
				if n, _ := unix.Getxattr(stolen, "system.posix_acl_access", nil); n > 0 {
					t.Errorf("after %s: the file keeps an ACL", a.name)
				}
				if _, err := os.Lstat(path); a.gone != errors.Is(err, os.ErrNotExist) {
					t.Errorf("after %s: its name in the directory: %v, want removed %v", a.name, err, a.gone)
				}
				if a.gone && st.Size != 0 {
					t.Errorf("after %s: the file holds %d bytes, want it emptied", a.name, st.Size)
				}
				// The job's own descriptor writes on.
				if _, err := f.Write([]byte("more")); err != nil {
					t.Errorf("after %s: the job's descriptor: %v", a.name, err)
				}
			})
		}
	}
}

// TestWatchReportsFailure: a file the daemon cannot open to bound it (its
// user's, 0600, on a filesystem without ACLs, the daemon without
// CAP_DAC_OVERRIDE) is reported failed, with EACCES. Before, the look
// dropped the error and the bound stopped without a word.
func TestWatchReportsFailure(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "j.out")
	if err := os.WriteFile(path, pattern(6<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	var failed []error
	w := watcher{dir: dir, suffix: ".out", limit: 1 << 20, last: map[string]time.Time{}, pending: map[string]bool{},
		rep: Reports{Failed: func(p string, err error) {
			if p == path {
				failed = append(failed, err)
			}
		}}}
	asUnit(t, func() { w.look([]byte("j.out")) })
	if len(failed) != 1 || !errors.Is(failed[0], unix.EACCES) {
		t.Errorf("failures reported: %v, want one EACCES", failed)
	}
	// The file gone meanwhile is no failure.
	os.Remove(path)
	w.last = map[string]time.Time{}
	w.look([]byte("j.out"))
	if len(failed) != 1 {
		t.Errorf("a file gone was reported failed: %v", failed[1:])
	}
}
