// Package userdb names users and groups from the local files, /etc/passwd
// and /etc/group, for the log feed: never through NSS, so naming a uid on
// the event path can never wait on LDAP, SSSD or any network service.
//
// The files are read on first use and kept as two maps; a lookup costs a
// map read under a mutex and does not allocate (a Names from At, a map
// read alone; At takes no lock while the last look is recent). At most
// every CheckEvery a lookup stats both files and rereads one that is
// another file (replaced by a rename, as the shadow tools write it) or
// whose size or modification time changed. Limits: users and groups that exist only in a
// network directory have no name here (the id is still logged); a file
// larger than MaxBytes is read up to its last whole line within MaxBytes;
// entries are taken as glibc takes them, the first one of an id winning,
// as getpwuid does.
package userdb

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// CheckEvery is how often lookups look for changed files: a user renamed,
// added or removed is named as the files say at most this long after (two
// stats a second cost the event path nothing it would notice).
const CheckEvery = time.Second

// MaxBytes bounds how much of each file is read.
const MaxBytes = 8 << 20

// DB names users and groups. It is safe for concurrent use.
type DB struct {
	now func() time.Time
	// fresh is the maps as read by the last look and its time: At reads
	// them without the lock while that look is less than CheckEvery old.
	fresh atomic.Pointer[snapshot]

	mu      sync.Mutex
	checked time.Time
	users   table
	groups  table
	gen     uint64 // of the maps as read (from gens)
}

// gens numbers the maps read, by any DB: a Gen is never reused.
var gens atomic.Uint64

// snapshot is a Names and the time of the look that read it.
type snapshot struct {
	names   Names
	checked int64 // Unix ns
}

type table struct {
	path   string
	passwd bool   // passwd lines (ParsePasswd), not group lines
	id     fileID // of the file read
	names  map[uint32]string
}

// New returns a DB over the given passwd and group files.
func New(passwd, group string) *DB {
	return &DB{now: time.Now, users: table{path: passwd, passwd: true}, groups: table{path: group}}
}

// Local returns a DB over /etc/passwd and /etc/group.
func Local() *DB { return New("/etc/passwd", "/etc/group") }

// User returns the name of uid, and false when the passwd file has none.
func (d *DB) User(uid uint32) (string, bool) { return d.lookup(&d.users, uid) }

// Group returns the name of gid, and false when the group file has none.
func (d *DB) Group(gid uint32) (string, bool) { return d.lookup(&d.groups, gid) }

func (d *DB) lookup(t *table, id uint32) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.check(d.now())
	return name(t.names, id)
}

// name returns the name of id in names, and false when there is none or
// it is not UTF-8 (kept as "": see Parse).
func name(names map[uint32]string, id uint32) (string, bool) {
	n, ok := names[id]
	return n, ok && n != ""
}

// check rereads changed files when the last look is CheckEvery old. d.mu
// is held.
func (d *DB) check(now time.Time) {
	if d.checked.IsZero() || now.Sub(d.checked) >= CheckEvery || now.Before(d.checked) {
		d.checked = now
		if cu, cg := d.users.refresh(), d.groups.refresh(); cu || cg || d.gen == 0 {
			d.gen = gens.Add(1)
		}
		d.fresh.Store(&snapshot{d.names(), now.UnixNano()})
	}
}

// Names is both files as they were read at one moment: an encoder that
// names many ids in one line takes it once (At) and looks up without a
// lock or a clock read. The zero Names names nothing.
type Names struct {
	users, groups map[uint32]string
	gen           uint64
}

// Gen tells Names apart: two Names with the same Gen are of one DB, whose
// files were not reread with a change in between, and name every id alike.
// The zero Names has Gen 0, a DB's Names never do.
func (n Names) Gen() uint64 { return n.gen }

// At returns the names as of now, rereading a file that changed when the
// last look is CheckEvery old, as User and Group do. A nil DB names
// nothing.
func (d *DB) At(now time.Time) Names {
	if d == nil {
		return Names{}
	}
	if s := d.fresh.Load(); s != nil {
		if n := now.UnixNano(); n >= s.checked && n-s.checked < int64(CheckEvery) {
			return s.names
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.check(now)
	return d.names()
}

// names returns the maps as read. d.mu is held. A refresh replaces the
// maps, never changes them: these stay as read.
func (d *DB) names() Names {
	return Names{users: d.users.names, groups: d.groups.names, gen: d.gen}
}

// User returns the name of uid, and false when there is none.
func (n Names) User(uid uint32) (string, bool) { return name(n.users, uid) }

// Group returns the name of gid, and false when there is none.
func (n Names) Group(gid uint32) (string, bool) { return name(n.groups, gid) }

// refresh rereads the file when it is another file or its size or
// modification time changed (a rewrite within one tick of the clock that
// stamps it can keep both: usermod -l a1 a2 just after useradd a1),
// and reports whether it replaced the map. A file that cannot be read
// names nothing.
func (t *table) refresh() (changed bool) {
	st, err := statPath(t.path)
	if err != nil {
		changed = t.names != nil
		t.names, t.id = nil, fileID{}
		return changed
	}
	if t.names != nil && st.same(t.id) {
		return false
	}
	f, err := os.Open(t.path)
	if err != nil {
		t.names = nil
		return true
	}
	defer f.Close()
	// Kept is the opened file's stat, taken before reading it: a file
	// renamed over the path since the first stat is another at the next
	// look, and one written while it is read has changed since.
	if st, err = statFile(f); err != nil {
		t.names = nil
		return true
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		t.names = nil
		return true
	}
	if len(b) > MaxBytes {
		// Cut at the bound: the line it cuts would read as another
		// (the group "staff:x:12345:bob" as "staff:x:12"), so it is
		// left out.
		b = b[:bytes.LastIndexByte(b[:MaxBytes], '\n')+1]
	}
	t.names, t.id = t.parse(b), st
	return true
}

// Parse reads passwd or group lines (name:password:id:...) into a map from
// id to name. Comments, blank lines, NIS lines (+ and -) and lines whose
// third field is not a 32-bit number are skipped; the first name of an id
// wins. A name that is not UTF-8 is kept as "", no name: JSON would show
// it with U+FFFD in place of its odd bytes, a name the user does not have,
// and a later line of its id must not name it either (getpwuid would give
// the first).
func Parse(b []byte) map[uint32]string { return parse(b, false) }

// ParsePasswd is Parse for passwd lines, which also need a fourth field,
// the group id, that is a number: glibc skips a line without one
// ("foo:x:1000" or "foo:x:1000:"), so getpwuid names the id by a later
// line, and so must this.
func ParsePasswd(b []byte) map[uint32]string { return parse(b, true) }

func (t *table) parse(b []byte) map[uint32]string { return parse(b, t.passwd) }

func parse(b []byte, passwd bool) map[uint32]string {
	names := make(map[uint32]string)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		f := bytes.SplitN(line, []byte{':'}, 4)
		if len(f) < 3 || len(f[0]) == 0 {
			continue
		}
		id, err := strconv.ParseUint(string(f[2]), 10, 32)
		if err != nil {
			continue
		}
		if passwd {
			if len(f) < 4 {
				continue
			}
			gid, _, _ := bytes.Cut(f[3], []byte{':'})
			if _, err := strconv.ParseUint(string(gid), 10, 32); err != nil {
				continue
			}
		}
		if _, dup := names[uint32(id)]; !dup {
			n := ""
			if utf8.Valid(f[0]) {
				n = string(f[0])
			}
			names[uint32(id)] = n
		}
	}
	return names
}
