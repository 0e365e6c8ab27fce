package procfs

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// BootID is the kernel's random boot id (/proc/sys/kernel/random/boot_id),
// which changes on every boot.
type BootID [16]byte

// String returns the id as 32 lower-case hex digits.
func (b BootID) String() string { return hex.EncodeToString(b[:]) }

// ParseBootID parses the text form the kernel prints (a dashed UUID) or 32 hex
// digits.
func ParseBootID(s string) (BootID, error) {
	var id BootID
	s = strings.TrimSpace(strings.ReplaceAll(s, "-", ""))
	if len(s) != 32 {
		return id, fmt.Errorf("boot id %q: want 32 hex digits: %w", s, ErrMalformed)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("boot id %q: %w", s, ErrMalformed)
	}
	return id, nil
}

// ReadBootID reads the boot id from the proc file system at root.
func ReadBootID(root string) (BootID, error) {
	b, err := os.ReadFile(root + "/sys/kernel/random/boot_id")
	if err != nil {
		return BootID{}, fmt.Errorf("read boot id: %w", err)
	}
	return ParseBootID(string(b))
}

// Pids lists the numeric entries of root: every thread group (process) id
// visible in this pid namespace. Thread ids that are not group leaders are
// not listed by the kernel, though they can be opened by name.
func Pids(root string) ([]int32, error) {
	d, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	pids := make([]int32, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		v, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			continue
		}
		pids = append(pids, int32(v))
	}
	return pids, nil
}

// Tgid returns the thread group id of the task pid from root/pid/status. For
// a process it equals pid; for a thread it names the process the thread
// belongs to.
func Tgid(root string, pid int32) (int32, error) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return 0, err
	}
	return ParseStatusTgid(b)
}

// ParseStatusTgid extracts the Tgid line of a /proc/PID/status file.
func ParseStatusTgid(b []byte) (int32, error) {
	v, ok := LineValue(b, "Tgid:")
	if !ok {
		return 0, fmt.Errorf("status: no Tgid line: %w", ErrMalformed)
	}
	t, ok := atoi32(v)
	if !ok {
		return 0, fmt.Errorf("status: bad Tgid: %w", ErrMalformed)
	}
	return t, nil
}

// ReadBootTime reads the boot time in Unix seconds from the btime line of
// root/stat (/proc/stat). The kernel derives it from the wall clock minus
// the uptime, so it moves when the clock is stepped.
func ReadBootTime(root string) (int64, error) {
	b, err := os.ReadFile(root + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read boot time: %w", err)
	}
	return ParseBootTime(b)
}

// ParseBootTime extracts the btime line of a /proc/stat file.
func ParseBootTime(b []byte) (int64, error) {
	v, ok := LineValue(b, "btime ")
	if !ok {
		return 0, fmt.Errorf("stat: no btime line: %w", ErrMalformed)
	}
	t, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || t <= 0 {
		return 0, fmt.Errorf("stat: bad btime %q: %w", v, ErrMalformed)
	}
	return t, nil
}

// LineValue returns the rest of the first line of b that starts with
// prefix, trimmed of spaces.
func LineValue(b []byte, prefix string) ([]byte, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			return bytes.TrimSpace(v), true
		}
	}
	return nil, false
}

// IDs are the real, effective and saved user ids of a process.
type IDs struct {
	Real, Effective, Saved uint32
}

// ReadUIDs reads the user ids of pid from root/PID/status.
func ReadUIDs(root string, pid int32) (IDs, error) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return IDs{}, err
	}
	return ParseStatusUIDs(b)
}

// ParseStatusUIDs extracts the Uid line (real, effective, saved, fs) of a
// /proc/PID/status file.
func ParseStatusUIDs(b []byte) (IDs, error) { return parseIDs(b, "Uid") }

// ParseStatusGIDs extracts the Gid line (real, effective, saved, fs) of a
// /proc/PID/status file, as IDs.
func ParseStatusGIDs(b []byte) (IDs, error) { return parseIDs(b, "Gid") }

func parseIDs(b []byte, name string) (IDs, error) {
	v, ok := LineValue(b, name+":")
	if !ok {
		return IDs{}, fmt.Errorf("status: no %s line: %w", name, ErrMalformed)
	}
	f := bytes.Fields(v)
	if len(f) < 3 {
		return IDs{}, fmt.Errorf("status: short %s line: %w", name, ErrMalformed)
	}
	var out [3]uint32
	for i := range out {
		n, err := strconv.ParseUint(string(f[i]), 10, 32)
		if err != nil {
			return IDs{}, fmt.Errorf("status: bad %s %q: %w", name, f[i], ErrMalformed)
		}
		out[i] = uint32(n)
	}
	return IDs{Real: out[0], Effective: out[1], Saved: out[2]}, nil
}

// All reports whether the real, effective and saved ids are all id.
func (i IDs) All(id uint32) bool { return i.Real == id && i.Effective == id && i.Saved == id }

// ParseStatusGroups extracts the Groups line (the supplementary groups) of
// a /proc/PID/status file. A process without supplementary groups has an
// empty line: an empty list, not an error. A value that is not a group id
// makes the whole line malformed: a caller that hands these groups on
// must not hand on part of them as if it were all.
func ParseStatusGroups(b []byte) ([]uint32, error) {
	v, ok := LineValue(b, "Groups:")
	if !ok {
		return nil, fmt.Errorf("status: no Groups line: %w", ErrMalformed)
	}
	f := bytes.Fields(v)
	out := make([]uint32, 0, len(f))
	for _, g := range f {
		n, err := strconv.ParseUint(string(g), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("status: bad group %q: %w", g, ErrMalformed)
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

// NSpid reads the NSpid line of root/PID/status: the process's pid in each
// pid namespace it belongs to, outermost first. A process whose last entry
// is 1 in a namespace other than the reader's is that namespace's init.
func NSpid(root string, pid int32) ([]int32, error) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return nil, err
	}
	return ParseStatusNSpid(b)
}

// ParseStatusNSpid extracts the NSpid line of a /proc/PID/status file.
func ParseStatusNSpid(b []byte) ([]int32, error) {
	v, ok := LineValue(b, "NSpid:")
	if !ok {
		return nil, fmt.Errorf("status: no NSpid line: %w", ErrMalformed)
	}
	var out []int32
	for _, f := range bytes.Fields(v) {
		n, ok := atoi32(f)
		if !ok || n <= 0 {
			return nil, fmt.Errorf("status: bad NSpid %q: %w", f, ErrMalformed)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("status: empty NSpid line: %w", ErrMalformed)
	}
	return out, nil
}

// limitNames are the rows of /proc/PID/limits, indexed by RLIMIT_*.
var limitNames = [...]string{"Max cpu time", "Max file size", "Max data size", "Max stack size",
	"Max core file size", "Max resident set", "Max processes", "Max open files", "Max locked memory",
	"Max address space", "Max file locks", "Max pending signals", "Max msgqueue size",
	"Max nice priority", "Max realtime priority", "Max realtime timeout"}

// Unlimited is a limit without bound (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// Limits are a process's resource limits, soft and hard, indexed by
// RLIMIT_*.
type Limits [len(limitNames)][2]uint64

// ReadLimits reads root/PID/limits, which any user may read (prlimit of
// another user's process needs CAP_SYS_RESOURCE).
func ReadLimits(root string, pid int32) (Limits, error) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(int(pid)) + "/limits")
	if err != nil {
		return Limits{}, err
	}
	return ParseLimits(b)
}

// ParseLimits parses a /proc/PID/limits file. Every limit must be there.
func ParseLimits(b []byte) (Limits, error) {
	var out Limits
	var seen [len(limitNames)]bool
	for _, line := range bytes.Split(b, []byte("\n")) {
		for i, name := range limitNames {
			rest, ok := bytes.CutPrefix(line, []byte(name+" "))
			if !ok {
				continue
			}
			f := bytes.Fields(rest)
			if len(f) < 2 {
				return out, fmt.Errorf("limits: short %q line: %w", name, ErrMalformed)
			}
			for j := range 2 {
				if string(f[j]) == "unlimited" {
					out[i][j] = Unlimited
					continue
				}
				v, err := strconv.ParseUint(string(f[j]), 10, 64)
				if err != nil {
					return out, fmt.Errorf("limits: bad %s %q: %w", name, f[j], ErrMalformed)
				}
				out[i][j] = v
			}
			seen[i] = true
		}
	}
	for i, ok := range seen {
		if !ok {
			return out, fmt.Errorf("limits: no %q line: %w", limitNames[i], ErrMalformed)
		}
	}
	return out, nil
}

// Children lists the children of pid, from root/PID/task/*/children (each
// thread's children; the kernel lists a child under the thread that
// forked it).
func Children(root string, pid int32) ([]int32, error) {
	dir := root + "/" + strconv.Itoa(int(pid)) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		out = ParseChildren(b, out)
	}
	return out, nil
}

// ParseChildren appends the pids of a task's children file (pids separated
// by spaces) to out. Anything but a positive pid is skipped: a child
// missing from the list is a child not found, which every caller of
// Children already allows for (the list is a moment's, and racy).
func ParseChildren(b []byte, out []int32) []int32 {
	for _, f := range bytes.Fields(b) {
		if v, ok := atoi32(f); ok && v > 0 {
			out = append(out, v)
		}
	}
	return out
}
