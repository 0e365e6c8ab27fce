// Package procfs parses the few /proc files the supervisor reads: a process's
// stat line, the boot id and the pid list. Parsers take bytes or a root
// directory, never the live /proc implicitly, so they can be fuzzed and tested
// on recorded trees.
//
// Limits: a read of /proc/PID/... names a pid, not an instance. Callers that
// need the answer to belong to a particular instance must read it after
// binding a pidfd and confirm the pidfd still names a live process afterwards
// (see internal/pidfd).
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// ErrMalformed reports a /proc file whose content does not parse.
var ErrMalformed = errors.New("malformed /proc content")

// ErrTimeNamespace: this process runs in a time namespace whose boot-time
// offset cannot be taken out of the start times /proc shows it exactly
// (not a whole number of clock ticks, or a start before a negative
// offset): no start time is given rather than one a tick off, which
// would name another instance.
var ErrTimeNamespace = errors.New("start times cannot be read exactly in this time namespace (its boot-time offset is not a whole number of clock ticks, or the start precedes it)")

// Stat holds the fields of /proc/PID/stat the supervisor uses.
type Stat struct {
	Pid       int32
	Comm      [16]byte // NUL padded, as the kernel's task comm
	State     byte     // R, S, D, Z, T, t, X, I ...
	PPid      int32
	PGrp      int32
	Session   int32
	TTY       int32  // the controlling terminal's device number, 0 for none
	StartTime uint64 // clock ticks since boot (field 22)
}

// CommString returns Comm without its NUL padding.
func (s *Stat) CommString() string {
	n := bytes.IndexByte(s.Comm[:], 0)
	if n < 0 {
		n = len(s.Comm)
	}
	return string(s.Comm[:n])
}

// Zombie reports whether the process has exited and waits to be reaped.
func (s *Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// ParseStat parses the content of /proc/PID/stat into st. It allocates
// nothing. The start time is the host's: a time namespace's boot-time
// offset, which /proc adds for a reader in it, is taken out. The comm field may hold spaces and parentheses, so the fields
// after it are found from the last ')'.
func ParseStat(b []byte, st *Stat) error {
	open := bytes.IndexByte(b, '(')
	closeIdx := bytes.LastIndexByte(b, ')')
	if open < 1 || closeIdx < open {
		return fmt.Errorf("stat: no comm field: %w", ErrMalformed)
	}
	pid, ok := atoi32(bytes.TrimSpace(b[:open]))
	if !ok || pid <= 0 {
		return fmt.Errorf("stat: bad pid: %w", ErrMalformed)
	}
	*st = Stat{Pid: pid}
	copy(st.Comm[:], b[open+1:closeIdx])
	rest := b[closeIdx+1:]
	// Field 3 (state) is the first after comm; we need up to field 22.
	field := 2
	for field < 22 {
		rest = skipSpaces(rest)
		if len(rest) == 0 {
			return fmt.Errorf("stat: %d fields, want 22: %w", field, ErrMalformed)
		}
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		tok := bytes.TrimRight(rest[:end], "\n")
		rest = rest[end:]
		field++
		switch field {
		case 3:
			if len(tok) != 1 || !('A' <= tok[0] && tok[0] <= 'Z' || 'a' <= tok[0] && tok[0] <= 'z') {
				return fmt.Errorf("stat: bad state %q: %w", tok, ErrMalformed)
			}
			st.State = tok[0]
		case 4, 5, 6, 7:
			v, ok := atoi32(tok)
			if !ok {
				return fmt.Errorf("stat: bad field %d: %w", field, ErrMalformed)
			}
			switch field {
			case 4:
				st.PPid = v
			case 5:
				st.PGrp = v
			case 6:
				st.Session = v
			case 7:
				st.TTY = v
			}
		case 22:
			v, err := strconv.ParseUint(string(tok), 10, 64)
			if err != nil {
				return fmt.Errorf("stat: bad starttime: %w", ErrMalformed)
			}
			// In a time namespace the kernel shows start times with its
			// boot-time offset added (bootOffsetTicks).
			if off, exact := bootOffsetTicks(); !exact {
				return fmt.Errorf("stat: starttime: %w", ErrTimeNamespace)
			} else if off != 0 {
				// A start before a negative offset wrapped below zero
				// in the kernel's sum: a value no clock reaches.
				if int64(v) < off || v > 1<<40 {
					return fmt.Errorf("stat: starttime %d does not fit the time namespace's offset of %d ticks: %w", v, off, ErrTimeNamespace)
				}
				v = uint64(int64(v) - off)
			}
			st.StartTime = v
		}
	}
	return nil
}

func skipSpaces(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

func atoi32(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 11 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, false
	}
	return int32(v), true
}

// Reader reads /proc files under a root (normally "/proc") into a reused
// buffer, so a caller on a hot path does not allocate per read.
type Reader struct {
	Root string
	buf  [1024]byte
	path []byte
}

// NewReader returns a Reader for the proc file system mounted at root.
func NewReader(root string) *Reader { return &Reader{Root: root} }

// ReadStat reads and parses ROOT/pid/stat. A missing process yields an error
// that matches os.ErrNotExist (ENOENT or ESRCH from the read).
func (r *Reader) ReadStat(pid int32, st *Stat) error {
	r.path = append(r.path[:0], r.Root...)
	r.path = append(r.path, '/')
	r.path = strconv.AppendInt(r.path, int64(pid), 10)
	r.path = append(r.path, "/stat"...)
	n, err := readFile(r.path, r.buf[:])
	if err != nil {
		return err
	}
	return ParseStat(r.buf[:n], st)
}
