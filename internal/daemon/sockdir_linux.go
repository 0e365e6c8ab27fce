package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/procsupervisor/supervisor/internal/logfeed"
)

// ErrUnsafeSocketDir: another user could replace the API socket, because
// they own, or may write to, the directory that holds it (or, without the
// sticky bit, one of the directories above it). A client that connects
// there could then be talking to a socket of theirs, and a daemon that
// removes a stale socket there could be removing a file of theirs. The
// daemon refuses to start on such a directory; errors also wrap ErrConfig.
var ErrUnsafeSocketDir = errors.New("unsafe socket directory")

// ErrUnsafeStateDir: another user owns, or may write to, the state
// directory or (without the sticky bit) a directory above it, so could put
// a symlink where the daemon, as root, writes its store and its jobs'
// output (a job's output file created in /etc), or swap the store. The
// daemon refuses to start on it; errors also wrap ErrConfig.
var ErrUnsafeStateDir = errors.New("unsafe state directory")

// ErrUnsafeLogDir: another user owns, or may write to, the directory of
// the log file (or, without the sticky bit, one above it), so could put a
// symlink or a file of theirs where the daemon, as root, appends every
// process's events: a file of root's written to, or the feed read and
// rewritten by that user. The daemon refuses to start; errors also wrap
// ErrConfig.
var ErrUnsafeLogDir = errors.New("unsafe log directory")

// ErrUnsafeMetricsDir: another user owns, or may write to, the directory
// of the metrics socket (or, without the sticky bit, one above it), so
// could put a file or a socket of theirs there, which the daemon, as
// root, would remove to listen in its place. The daemon refuses to start;
// errors also wrap ErrConfig.
var ErrUnsafeMetricsDir = errors.New("unsafe metrics socket directory")

// checkMetricsDir checks the directory of a unix:PATH metrics address as
// checkSocketDir checks the API socket's; other addresses pass.
func checkMetricsDir(addr string, euid int) error {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok || path == "" {
		return nil
	}
	if err := noDotDot(path, "metrics socket", ErrUnsafeMetricsDir); err != nil {
		return err
	}
	return checkDir(filepath.Dir(path), euid, "metrics socket directory", "another user could have the daemon remove a file of theirs, or take the socket's place", ErrUnsafeMetricsDir)
}

// checkLogDir checks the directory of a file log output as checkSocketDir
// checks the socket's; other outputs pass.
func checkLogDir(output string, euid int) error {
	out, err := logfeed.ParseOutput(output)
	if err != nil || out.Kind != logfeed.OutputFile {
		return nil // configuration checks report a bad output
	}
	if err := noDotDot(out.Path, "log file", ErrUnsafeLogDir); err != nil {
		return err
	}
	return checkDir(filepath.Dir(out.Path), euid, "log directory", "another user could redirect or read the daemon's log file", ErrUnsafeLogDir)
}

// prepareStateDir creates the state directory when missing (mode 0700) and
// checks it as checkSocketDir checks the socket's.
func prepareStateDir(dir string, euid int) error {
	if err := noDotDot(dir, "state directory", ErrUnsafeStateDir); err != nil {
		return err
	}
	const risk = "another user could redirect the daemon's store or its jobs' output"
	if err := checkAncestor(dir, euid, "state directory", risk, ErrUnsafeStateDir); err != nil {
		return err
	}
	if err := mkdirChecked(dir, 0o700, euid, "state directory", risk, ErrUnsafeStateDir); err != nil {
		return err
	}
	return checkDir(dir, euid, "state directory", risk, ErrUnsafeStateDir)
}

// beforeMkdir, when set, runs between a directory's checks and its
// creation (tests: another user's move in that window).
var beforeMkdir func()

// mkdirChecked creates dir and its missing parents one at a time, each
// with perm, and checks each as it is once made: a directory, not a
// symlink, owned by root or euid. MkdirAll followed a symlink another user
// put where a missing parent was to be, in the window after the checks
// (in a sticky directory such as /tmp, where the daemon's own directory,
// once made, can be neither removed nor renamed by others), and root
// made a directory wherever it pointed.
func mkdirChecked(dir string, perm os.FileMode, euid int, what, risk string, sentinel error) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var missing []string
	for a := abs; a != "/"; a = filepath.Dir(a) {
		if _, err := os.Lstat(a); err == nil {
			break
		}
		missing = append(missing, a)
	}
	if beforeMkdir != nil {
		beforeMkdir()
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, perm); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s: %w", what, err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if why := unsafeDir(fi, euid, false); why != "" {
			return fmt.Errorf("%s %s: %s %s: %s; use a path only root (or the daemon's user) may change: %w: %w",
				what, dir, p, why, risk, sentinel, ErrConfig)
		}
	}
	return nil
}

// prepareSocketDir makes the directory of the socket sock ready to listen
// in: created when missing (mode 0755, owned by the daemon's user, so root's
// is root-owned like the unit's RuntimeDirectory), then checked with
// checkSocketDir. Missing parents are created too, with mode 0755 less the
// umask.
func prepareSocketDir(sock string, euid int) error {
	if err := noDotDot(sock, "socket", ErrUnsafeSocketDir); err != nil {
		return err
	}
	dir := filepath.Dir(sock)
	if err := checkAncestor(dir, euid, "socket directory", "another user could replace the daemon's socket", ErrUnsafeSocketDir); err != nil {
		return err
	}
	if err := mkdirChecked(filepath.Dir(dir), 0o755, euid, "socket directory", "another user could replace the daemon's socket", ErrUnsafeSocketDir); err != nil {
		return err
	}
	// Mkdir, not MkdirAll: a directory that appeared since (someone
	// else's) is not chmod-ed, only checked.
	switch err := os.Mkdir(dir, 0o755); {
	case err == nil:
		// The umask may have taken bits off; clients need to traverse it.
		if err := os.Chmod(dir, 0o755); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
	case !errors.Is(err, os.ErrExist):
		return fmt.Errorf("socket directory: %w", err)
	}
	return checkSocketDir(dir, euid)
}

// checkSocketDir returns an error wrapping ErrUnsafeSocketDir unless dir
// and every directory above it are owned by root or euid, dir is writable
// by its owner only, and any directory above it that others may write to
// has the sticky bit (as /tmp has: nobody else may rename or remove what
// is in it). Both the path as given and the path with symlinks resolved
// are checked, and a symlink on the way must be root's or euid's: it is as
// safe as the directory that holds it only while its owner may not replace
// it.
//
// Limits: the check is made once, at start; a directory whose owner or
// mode changes later is not noticed. ACLs are not read.
func checkSocketDir(dir string, euid int) error {
	return checkDir(dir, euid, "socket directory", "another user could replace the daemon's socket", ErrUnsafeSocketDir)
}

// noDotDot refuses a configured path with a ".." component: the kernel
// follows a symlink before it applies "..", so the cleaned path checked
// (/tmp/link/../logs is /tmp/logs) need not be the one opened.
func noDotDot(path, what string, sentinel error) error {
	if slices.Contains(strings.Split(path, "/"), "..") {
		return fmt.Errorf("%s %s: has a \"..\" component; write the path without: %w: %w", what, path, sentinel, ErrConfig)
	}
	return nil
}

// maxLinks bounds the symlinks one path may go through, as the kernel's
// 40 (ELOOP).
const maxLinks = 40

// checkDir is checkSocketDir for a directory named what, whose errors say
// risk and wrap sentinel. It resolves dir as the kernel would, a component
// at a time, and checks every directory a name is looked up in (each may
// replace the entry) and every symlink met, the links of a chain too (each
// must be root's or euid's: another user's symlink in a sticky directory
// is theirs to replace), then dir itself.
func checkDir(dir string, euid int, what, risk string, sentinel error) error {
	return checkPath(dir, euid, what, risk, sentinel, true)
}

// checkAncestor checks, before anything is created on the way to dir,
// the deepest part of it that exists: as a directory to create in (one
// writable by others may hold what root creates only with the sticky
// bit), every directory and symlink on the way to it as checkDir does.
// Root created directories through another user's symlink (its target
// elsewhere) before the check of dir refused it.
func checkAncestor(dir string, euid int, what, risk string, sentinel error) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for a := abs; ; a = filepath.Dir(a) {
		if _, err := os.Lstat(a); err == nil || a == "/" {
			return checkPath(a, euid, what, risk, sentinel, a == abs)
		}
	}
}

// checkPath is checkDir, the last directory checked as one to hold what
// the daemon makes (last) or as one on the way to it.
func checkPath(dir string, euid int, what, risk string, sentinel error, last bool) error {
	unsafe := func(q, why string) error {
		return fmt.Errorf("%s %s: %s %s: %s; use a path only root (or the daemon's user) may change: %w: %w",
			what, dir, q, why, risk, sentinel, ErrConfig)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	cur, rest, links := "/", strings.Split(abs, "/"), 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..": // from a symlink's target: cur has no symlink left
			cur = filepath.Dir(cur)
			continue
		}
		fi, err := os.Lstat(cur)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if why := unsafeDir(fi, euid, false); why != "" {
			return unsafe(cur, why)
		}
		next := filepath.Join(cur, name)
		fi, err = os.Lstat(next)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 && int(st.Uid) != euid {
			return unsafe(next, fmt.Sprintf("is a symlink of uid %d (not root, nor the daemon's uid %d)", uidOf(fi), euid))
		}
		if links++; links > maxLinks {
			return fmt.Errorf("%s %s: more than %d symlinks: %w", what, dir, maxLinks, ErrConfig)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	fi, err := os.Lstat(cur)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if why := unsafeDir(fi, euid, last); why != "" {
		return unsafe(cur, why)
	}
	return nil
}

// uidOf is fi's owner, or -1 when it has none to read.
func uidOf(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Uid)
	}
	return -1
}

// unsafeDir says why fi may not hold or lead to the socket, or "".
func unsafeDir(fi os.FileInfo, euid int, last bool) string {
	if !fi.IsDir() {
		return "is not a directory"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "has no owner to check"
	}
	if st.Uid != 0 && int(st.Uid) != euid {
		return fmt.Sprintf("is owned by uid %d (not root, nor the daemon's uid %d)", st.Uid, euid)
	}
	mode := fi.Mode()
	if mode.Perm()&0o022 == 0 || (!last && mode&os.ModeSticky != 0) {
		return ""
	}
	return "is writable by its group or others (" + mode.String() + ")"
}
