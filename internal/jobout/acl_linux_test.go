package jobout

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

const nobody = 65534

// leaseAs runs perl as nobody: it opens path for appending, as a job may
// open its /dev/stdout anew, then asks for a write lease on it
// (F_SETLEASE, F_WRLCK), and says which step failed.
func leaseAs(t *testing.T, path string) string {
	t.Helper()
	perl, err := exec.LookPath("perl")
	if err != nil {
		testenv.Skip(t, "no perl: %v", err)
	}
	cmd := exec.Command(perl, "-e", `open(my $f, ">>", $ARGV[0]) or die "open: $!\n"; print $f "x"; fcntl($f, 1024, 1) or die "lease: $!\n"; print "leased\n"`, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// TestGiveTo: a job's output file given to its user stays root's, with an
// ACL entry for the user: the user opens and writes it (and reads it),
// but may take no lease on it, which held the bound off. A file chowned
// to the user, as before, lets it.
func TestGiveTo(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o711)
	os.Chmod(filepath.Dir(dir), 0o755)
	for _, tc := range []struct {
		name  string
		give  func(fd int) error
		lease string
	}{
		{"ACL", func(fd int) error {
			acl, err := GiveTo(fd, nobody, nobody)
			if err == nil && !acl {
				err = errors.New("no ACL on this filesystem")
			}
			return err
		}, "lease: Permission denied"},
		{"chown, as before", func(fd int) error { return unix.Fchown(fd, nobody, nobody) }, "leased"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".out")
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.give(int(f.Fd())); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got := leaseAs(t, path); got != tc.lease {
				t.Errorf("nobody's append and lease: %q, want %q", got, tc.lease)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != "x" {
				t.Errorf("the file holds %q, %v; want nobody's write", b, err)
			}
			var st unix.Stat_t
			if err := unix.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			if owner := st.Uid; (owner == 0) != (tc.lease != "leased") {
				t.Errorf("owner uid %d", owner)
			}
		})
	}
}
