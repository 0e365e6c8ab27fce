package userns

import (
	"bufio"
	"bytes"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A process can also run as a subordinate uid outside any user namespace
// of its user's: a workload the daemon started for a client in one runs in
// the daemon's namespace, as that uid. The ranges of /etc/subuid (what
// newuidmap grants) say whose it is wherever it runs.

// SubUIDFile is the file of subordinate uid ranges (a variable for tests).
var SubUIDFile = "/etc/subuid"

// Range is a user's range of subordinate uids: Count uids from Start.
type Range struct {
	Owner        uint32
	Start, Count uint32
}

// ParseSubUID parses the lines of /etc/subuid ("owner:start:count", owner a
// user name or a uid). Lines that are blank, comments, malformed or of a
// user lookup cannot name are left out: those uids then count as their
// own, as before the file was read.
func ParseSubUID(b []byte, lookup func(name string) (uint32, bool)) []Range {
	var out []Range
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || count == 0 || start+count > 1<<32 {
			continue
		}
		owner, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			o, ok := lookup(f[0])
			if !ok {
				continue
			}
			owner = uint64(o)
		}
		out = append(out, Range{Owner: uint32(owner), Start: uint32(start), Count: uint32(count)})
	}
	return out
}

// subuids is SubUIDFile as last read, read again when its modification
// time or size changes (looked at once a second at most).
var subuids struct {
	sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	ranges  []Range
}

// SubordinateOf returns the user whose subordinate uid uid is, by
// SubUIDFile, or uid itself.
func SubordinateOf(uid uint32) uint32 {
	subuids.Lock()
	defer subuids.Unlock()
	if now := time.Now(); now.Sub(subuids.checked) >= time.Second {
		subuids.checked = now
		if fi, err := os.Stat(SubUIDFile); err != nil {
			subuids.ranges, subuids.mod, subuids.size = nil, time.Time{}, 0
		} else if !fi.ModTime().Equal(subuids.mod) || fi.Size() != subuids.size {
			b, err := os.ReadFile(SubUIDFile)
			if err == nil {
				subuids.ranges, subuids.mod, subuids.size = ParseSubUID(b, lookupUser), fi.ModTime(), fi.Size()
			}
		}
	}
	for _, r := range subuids.ranges {
		// Ranges root holds (a container manager's) keep their uids
		// apart, as namespaces root made do.
		if uid >= r.Start && uint64(uid) < uint64(r.Start)+uint64(r.Count) && r.Owner != uid && r.Owner != 0 {
			return r.Owner
		}
	}
	return uid
}

func lookupUser(name string) (uint32, bool) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(v), err == nil
}
