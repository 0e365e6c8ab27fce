package procfs

import (
	"bufio"
	"bytes"
	"iter"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file: where it is mounted, the
// filesystem type and the superblock options.
type Mount struct {
	Point   string // unescaped
	FSType  string
	Options string // super options, comma-separated ("" when absent)
}

// Mounts yields the mounts of a mountinfo file in its order; lines without
// the " - " separator or a mount point are skipped, and a mount whose
// fields after the separator are missing has them empty.
func Mounts(mountinfo []byte) iter.Seq[Mount] {
	return func(yield func(Mount) bool) {
		sc := bufio.NewScanner(bytes.NewReader(mountinfo))
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			pre, post, ok := strings.Cut(sc.Text(), " - ")
			f, g := strings.Fields(pre), strings.Fields(post)
			if !ok || len(f) < 5 {
				continue
			}
			m := Mount{Point: unescapeMount(f[4])}
			if len(g) >= 1 {
				m.FSType = g[0]
			}
			if len(g) >= 3 {
				m.Options = g[2]
			}
			if !yield(m) {
				return
			}
		}
	}
}

// Cgroup2Mount finds the cgroup v2 mount point in a mountinfo file.
func Cgroup2Mount(mountinfo []byte) (string, bool) {
	for m := range Mounts(mountinfo) {
		if m.FSType == "cgroup2" {
			return m.Point, true
		}
	}
	return "", false
}

// unescapeMount undoes the octal escapes of mountinfo (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Cgroup2Path returns a process's cgroup v2 path from the content of its
// /proc/PID/cgroup (the "0::/path" line).
func Cgroup2Path(b []byte) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest, true
		}
	}
	return "", false
}
