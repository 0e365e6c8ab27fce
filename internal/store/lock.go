package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Lock is an exclusive advisory lock on a file, held until Close. A daemon
// can lock its state directory with it (Acquire(filepath.Join(dir, "lock")))
// before it opens anything else there; Open uses it on "<path>.lock".
type Lock struct {
	f    *os.File
	path string
}

// lockPoll is how often a held lock is retried until the timeout.
const lockPoll = 10 * time.Millisecond

// Acquire creates path (mode 0600) if needed, locks it exclusively, and
// writes the caller's pid into it for diagnostics. It waits at most
// timeout (a timeout <= 0 tries once). A lock held by another process, or
// by another open file in this process, fails with ErrLocked, and the
// message names the holder's pid when the file records one.
func Acquire(path string, timeout time.Duration) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if ok {
			break
		}
		if !time.Now().Before(deadline) {
			holder := readHolder(f)
			f.Close()
			return nil, fmt.Errorf("%s is held%s: %w", path, holder, ErrLocked)
		}
		time.Sleep(lockPoll)
	}
	// Best effort: the pid is only for the message of the next loser.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, path: path}, nil
}

func readHolder(f *os.File) string {
	var b [32]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && n == 0 {
		return ""
	}
	s := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(s); err != nil {
		return ""
	}
	return " by pid " + s
}

// Path returns the locked file's path.
func (l *Lock) Path() string { return l.path }

// Close releases the lock. The file stays: removing a lock file while
// another process waits on it would let two holders in.
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}
