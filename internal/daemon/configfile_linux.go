package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// configRisk is what another user who could choose the config file's
// content would gain.
const configRisk = "another user could choose what the daemon runs with (its log file, its socket's group, its quotas)"

// openConfig opens the config file path for a daemon of euid, refusing a
// file another user could have chosen the content of, however it came to
// be root's: the directory that holds it must be writable by root or
// euid alone (sticky is not enough: in /tmp any user may create the name
// first, as a hard link to a file of root's or a symlink to one), every
// directory and symlink on the way to it as checkDir has it for the
// state directory. The file itself is opened without following a
// symlink and without blocking (a FIFO returns at once, then is refused),
// and must be a regular file, with one link (a second name elsewhere may
// be a link its user made to a file root took back), not on procfs or
// sysfs (a /proc/PID/comm of a setuid process is root's and holds the
// name its user ran it by), and pass checkConfigFile. A refusal wraps
// ErrUnsafeConfig and ErrConfig; an error of the file system's (a
// missing file: fs.ErrNotExist) is wrapped as it came.
//
// Limits: ACLs are not read, and what is checked is checked once.
func openConfig(path string, euid int) (*os.File, error) {
	// Abs drops ".." by the text, where the kernel would apply it after
	// a symlink: the cleaned path is both the one checked and the one
	// opened.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkDir(filepath.Dir(abs), euid, "config file "+path+": directory", configRisk, ErrUnsafeConfig); err != nil {
		return nil, err
	}
	// The directories are now root's or euid's and none can be changed
	// by another user: the kernel resolves path as checkDir did.
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("config %s: is a symlink, which is not followed; pass the path of the file it names (readlink -f %s): %w: %w", path, path, ErrUnsafeConfig, ErrConfig)
	case err != nil:
		return nil, fmt.Errorf("config %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkConfigOpened(f, euid); err != nil {
		f.Close()
		return nil, fmt.Errorf("config %s: %v: %w: %w", path, err, ErrUnsafeConfig, ErrConfig)
	}
	return f, nil
}

// configFS are the file systems a config file may not be on, by statfs
// magic: their files are the kernel's, root's, and some hold what another
// user chose.
var configFS = map[int64]string{
	unix.PROC_SUPER_MAGIC: "procfs",
	unix.SYSFS_MAGIC:      "sysfs",
}

// checkConfigOpened checks the opened config file f: a regular file with
// one link, on no file system of configFS, and as checkConfigFile has it.
func checkConfigOpened(f *os.File, euid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file; pass a regular file")
	}
	if st.Nlink != 1 {
		return fmt.Errorf("has %d links: another name of it may be one another user made, to a file that is root's since; copy it to a file of its own", st.Nlink)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return err
	}
	if name, ok := configFS[int64(fs.Type)]; ok {
		return fmt.Errorf("is on %s, whose files the kernel makes, some with what another user chose; put the configuration in a regular file", name)
	}
	return checkConfigFile(f, euid)
}

// checkPaths checks, creating and changing nothing, what Run checks of
// the state directory (or of its deepest existing ancestor, where Run
// would create it: prepareStateDir), the log file's and the metrics
// socket's directories (checkLogDir, checkMetricsDir) and the API
// socket's (prepareSocketDir), in Run's order.
func (c *Config) checkPaths(euid int) error {
	if err := noDotDot(c.StateDir, "state directory", ErrUnsafeStateDir); err != nil {
		return err
	}
	if err := checkAncestor(c.StateDir, euid, "state directory", "another user could redirect the daemon's store or its jobs' output", ErrUnsafeStateDir); err != nil {
		return err
	}
	if err := checkLogDir(c.LogOutput, euid); err != nil {
		return err
	}
	if err := checkMetricsDir(c.MetricsListen, euid); err != nil {
		return err
	}
	if err := noDotDot(c.Socket, "socket", ErrUnsafeSocketDir); err != nil {
		return err
	}
	return checkAncestor(filepath.Dir(c.Socket), euid, "socket directory", "another user could replace the daemon's socket", ErrUnsafeSocketDir)
}
