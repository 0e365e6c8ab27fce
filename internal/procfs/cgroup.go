package procfs

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// Cgroup2Mount finds the cgroup v2 mount point in a mountinfo file.
func Cgroup2Mount(mountinfo []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		post := strings.Fields(line[sep+3:])
		pre := strings.Fields(line[:sep])
		if len(post) >= 1 && post[0] == "cgroup2" && len(pre) >= 5 {
			return unescapeMount(pre[4]), true
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
