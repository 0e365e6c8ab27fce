package fallback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Errors callers must tell apart. A snapshotter's error wraps exactly one of
// them (a timeout wraps ErrPSFailed and context.DeadlineExceeded).
var (
	// ErrPSFailed: ps could not be started, exited non-zero, was killed or
	// timed out.
	ErrPSFailed = errors.New("ps failed")
	// ErrOutputTooLarge: ps wrote more than the configured bound.
	ErrOutputTooLarge = errors.New("ps output over the size bound")
	// ErrImplausibleTable: the table cannot be the whole process table
	// (empty, lines that are not rows, duplicate pids, no pid 1, or not even
	// the supervisor itself).
	ErrImplausibleTable = errors.New("implausible process table")
	// ErrScanFailed: /proc or sysctl could not be read.
	ErrScanFailed = errors.New("process table scan failed")
)

// Entry is one process in a snapshot.
type Entry struct {
	Pid, PPid int32
	// Token is the instance's start token in the snapshotter's precision. It
	// is zero when the row gave a pid but no readable start time (Partial):
	// such an entry holds the pid but proves nothing about who holds it.
	Token token.Token
	// State is the scheduler state letter (R, S, D, T, Z, I, ...), 0 when
	// unknown.
	State byte
	// Comm is the process name, NUL padded. From ps it is derived from Args
	// (best effort: a process can rename itself), from /proc and sysctl it is
	// the kernel's name.
	Comm [16]byte
	// Args is the command line as ps printed it; empty from /proc and
	// sysctl.
	Args string
}

// Partial reports whether the entry has no usable start token.
func (e *Entry) Partial() bool { return e.Token.IsZero() }

// Zombie reports whether the process has exited and waits to be reaped.
func (e *Entry) Zombie() bool { return e.State == 'Z' || e.State == 'X' }

// CommString returns Comm without its NUL padding.
func (e *Entry) CommString() string {
	n := bytes.IndexByte(e.Comm[:], 0)
	if n < 0 {
		n = len(e.Comm)
	}
	return string(e.Comm[:n])
}

// Snapshot is one successful, plausible look at the process table. A
// snapshotter returns a Snapshot only with a nil error.
type Snapshot struct {
	// Seq numbers the snapshotter's attempts, failed ones included, so a
	// jump shows that attempts failed in between.
	Seq       uint64
	Taken     time.Time // when the look began
	Mechanism events.Mechanism
	Boot      procfs.BootID
	// BootTime is the boot time in Unix seconds (Linux /proc/stat btime),
	// used to compare a ticks token with wall-clock tokens; 0 when unknown.
	BootTime int64
	// Self is the pid the table had to contain besides pid 1 (the
	// supervisor's own).
	Self int32
	// Entries are sorted by pid; pids are unique.
	Entries []Entry
	// Partial counts entries without a start token.
	Partial int
}

// Lookup returns the entry for pid, or nil when the pid is not in the table.
func (s *Snapshot) Lookup(pid int32) *Entry {
	i := sort.Search(len(s.Entries), func(i int) bool { return s.Entries[i].Pid >= pid })
	if i < len(s.Entries) && s.Entries[i].Pid == pid {
		return &s.Entries[i]
	}
	return nil
}

// finish sorts the entries and checks that the table can be the whole
// process table: not empty, unique pids, pid 1 and self present.
func (s *Snapshot) finish() error {
	if len(s.Entries) == 0 {
		return fmt.Errorf("no processes: %w", ErrImplausibleTable)
	}
	sort.Slice(s.Entries, func(i, j int) bool { return s.Entries[i].Pid < s.Entries[j].Pid })
	s.Partial = 0
	for i := range s.Entries {
		if i > 0 && s.Entries[i].Pid == s.Entries[i-1].Pid {
			return fmt.Errorf("pid %d listed twice: %w", s.Entries[i].Pid, ErrImplausibleTable)
		}
		if s.Entries[i].Partial() {
			s.Partial++
		}
	}
	return s.plausible()
}

// plausible checks what a sane table must hold; Judge calls it again so that
// a hand-made Snapshot cannot slip through.
func (s *Snapshot) plausible() error {
	if len(s.Entries) == 0 {
		return fmt.Errorf("no processes: %w", ErrImplausibleTable)
	}
	if s.Lookup(1) == nil {
		return fmt.Errorf("%d processes but no pid 1: %w", len(s.Entries), ErrImplausibleTable)
	}
	if s.Self <= 0 || s.Lookup(s.Self) == nil {
		return fmt.Errorf("%d processes but not the supervisor itself (pid %d): %w", len(s.Entries), s.Self, ErrImplausibleTable)
	}
	return nil
}

// setComm copies a name into a NUL padded comm, truncated as the kernel does
// (15 bytes and a NUL).
func setComm(dst *[16]byte, name string) {
	*dst = [16]byte{}
	if len(name) > 15 {
		name = name[:15]
	}
	copy(dst[:], name)
}

// Snapshotter takes one look at the process table. Implementations: *Proc,
// *PS, *Sysctl.
type Snapshotter interface {
	Mechanism() events.Mechanism
	Snapshot(ctx context.Context) (*Snapshot, error)
}
