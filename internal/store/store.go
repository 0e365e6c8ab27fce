package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Errors callers must tell apart. Operations wrap them with context; test
// with errors.Is.
var (
	// ErrCorrupt: the file is not a bbolt file this package can read
	// safely, or a record in it does not decode. The file is left as it was.
	ErrCorrupt = errors.New("store is corrupt")
	// ErrLocked: another process (or another Store in this one) holds the
	// store.
	ErrLocked = errors.New("store is locked by another process")
	// ErrSchema: the store was written by a newer schema than this binary
	// knows.
	ErrSchema = errors.New("store has an unknown schema version")
	// ErrExists: Put of an ID already stored.
	ErrExists = errors.New("claim already exists")
	// ErrNotFound: no claim has the ID.
	ErrNotFound = errors.New("claim not found")
	// ErrTooLarge: a write exceeds a Limits bound, or the file reached
	// Options.MaxFileSize.
	ErrTooLarge = errors.New("claim too large")
	// ErrFull: the data file reached the size a write of its kind may
	// grow it to (see Options.MaxFileSize; it wraps ErrTooLarge too): no
	// such write can succeed until claims are deleted.
	ErrFull = errors.New("store full")
	// ErrInvalid: a write the store refuses (unknown kind or state,
	// malformed ID, changed ID or kind, invalid UTF-8).
	ErrInvalid = errors.New("invalid claim")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store is closed")
	// ErrMissing: the data file is not there, but something says a store
	// was (its lock file, Options.Evidence): it was moved or deleted, and
	// an empty store in its place would forget every claim it held.
	ErrMissing = errors.New("store file is missing")
)

// Defaults for Options.
const (
	DefaultLockTimeout = time.Second
	DefaultMaxFileSize = 256 << 20
)

// Options tune Open. The zero value is usable.
type Options struct {
	// LockTimeout bounds the wait for the locks; 0 means
	// DefaultLockTimeout, a negative value tries once.
	LockTimeout time.Duration
	// MaxFileSize caps the data file; writes that would grow it further
	// fail with ErrFull. 0 means DefaultMaxFileSize. Of it a reserve
	// (the larger of 64 KiB and a sixteenth) is kept for Update and
	// AddMember, and a second for Delete and RemoveMember, so that a
	// store that new claims (Put) filled can still record what its
	// claims do and can always be emptied: a bbolt write allocates its
	// new pages before it frees the old ones.
	MaxFileSize int
	// Limits bound each write; zero fields take DefaultLimits.
	Limits Limits
	// Rewrite, when set, is applied to every claim (members not loaded)
	// as the store opens, before it is shared; see rewrite.
	Rewrite func(*Claim) bool
	// Evidence are directories that a store's user fills as it runs (the
	// daemon's jobs/): when the data file is missing and any of them has
	// an entry, Open fails with ErrMissing instead of creating a store.
	// The store's own lock file is evidence too.
	Evidence []string
}

// Store is an open store. It is safe for concurrent use; writes are
// serialised by bbolt, reads run in parallel with them.
type Store struct {
	db   *bolt.DB
	lock *Lock
	path string
	lim  Limits
	// maxSize is the data file's cap (Options.MaxFileSize).
	maxSize int64
	// wmu serialises the writes with the setting of db.MaxSize each
	// makes for its tier (bbolt reads it while it allocates).
	wmu sync.Mutex
}

// tier is what a write may do to the data file's size: grow it for a new
// claim, change a claim, or shrink the store. Each may take the file
// further than the one before, so that a store the first filled still
// takes the others.
type tier int

const (
	grow tier = iota
	change
	shrink
)

// capFor returns the MaxSize bbolt is given for a write of tier t.
func (s *Store) capFor(t tier) int64 {
	reserve := max(64<<10, s.maxSize/16)
	return max(s.maxSize-int64(shrink-t)*reserve, 64<<10)
}

// allocSize is the step the data file grows by: a sixty-fourth of the
// cap, from 32 KiB to bbolt's 16 MiB. Each step is a truncate and an
// fsync; claims are a few KiB.
func (s *Store) allocSize() int64 {
	return min(max(s.maxSize/64, 32<<10), 16<<20)
}

// reach returns the largest data file bbolt grows to under MaxSize m: up
// to its AllocSize it maps the file in powers of two from 32 KiB, past it
// in steps keeping an AllocSize free (bbolt's DB.allocate and growSize).
func reach(m, allocSize int64) int64 {
	if m > allocSize {
		return max(allocSize, m-allocSize)
	}
	p := int64(32 << 10)
	for p*2 <= m {
		p *= 2
	}
	return p
}

// Open opens the store at path, creating it (mode 0600) when no file is
// there and nothing says one was (ErrMissing). The directory must exist.
// Errors wrap ErrLocked, ErrCorrupt, ErrSchema, ErrMissing, or the I/O
// error (fs.ErrPermission...). Open never rewrites, truncates or
// recreates an existing file it cannot read. With Options.Rewrite it
// rewrites the claims that function changes and then compacts the file
// (rewrite), or fails and leaves the file as it was.
func Open(path string, opts Options) (*Store, error) {
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = DefaultLockTimeout
	}
	if timeout < 0 {
		timeout = 0
	}
	// Acquire creates the lock file: whether it was there is read first.
	_, lerr := os.Lstat(path + ".lock")
	hadLock := lerr == nil
	lk, err := Acquire(path+".lock", timeout)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{lock: lk, path: path, lim: opts.Limits.withDefaults(), maxSize: int64(opts.MaxFileSize)}
	if s.maxSize <= 0 {
		s.maxSize = DefaultMaxFileSize
	}
	if err := s.open(opts, timeout, hadLock); err != nil {
		if _, serr := os.Lstat(path); !hadLock && errors.Is(serr, fs.ErrNotExist) {
			// A first open that made no store leaves no lock file to
			// be taken for the trace of one.
			os.Remove(path + ".lock")
		}
		lk.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// missing says why a store was at s.path before, when its file is not
// there: the lock file (hadLock; not when a leftover of create says the
// first creation was cut short), a compaction's leftover, or an entry in
// a directory of evidence. It returns "" when nothing says so.
func (s *Store) missing(hadLock bool, evidence []string) string {
	var why []string
	if _, err := os.Lstat(s.path + ".new"); hadLock && errors.Is(err, fs.ErrNotExist) {
		why = append(why, "its lock file "+s.path+".lock is there")
	}
	if _, err := os.Lstat(compactTemp(s.path)); err == nil {
		why = append(why, "a compaction's copy "+compactTemp(s.path)+" is there")
	}
	for _, dir := range evidence {
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(1)
		f.Close()
		if len(names) > 0 {
			why = append(why, dir+" holds files ("+names[0]+"...)")
		}
	}
	if len(why) == 0 {
		return ""
	}
	return strings.Join(why, " and ")
}

func boltOptions(opts Options, timeout time.Duration) *bolt.Options {
	maxSize := opts.MaxFileSize
	if maxSize == 0 {
		maxSize = DefaultMaxFileSize
	}
	if timeout <= 0 {
		timeout = time.Millisecond // bbolt waits forever on 0
	}
	return &bolt.Options{
		Timeout:        timeout,
		NoSync:         false, // every commit is fsync'ed
		NoFreelistSync: false, // the freelist is written, and checked at open
		NoGrowSync:     false,
		FreelistType:   bolt.FreelistArrayType,
		MaxSize:        maxSize,
	}
}

func (s *Store) open(opts Options, timeout time.Duration, hadLock bool) error {
	st, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if why := s.missing(hadLock, opts.Evidence); why != "" {
			return fmt.Errorf("no file, but a store was here: %s; put the file back, or, to start with an empty store and forget its claims (their processes left unmanaged), remove the lock file and those files: %w", why, ErrMissing)
		}
		if err := create(s.path, boltOptions(opts, timeout)); err != nil {
			return err
		}
	case err != nil:
		return err
	case st.Size() == 0:
		// Stores are created under another name and renamed into place,
		// so an empty file was never a store: it was truncated.
		return fmt.Errorf("empty file: %w", ErrCorrupt)
	}
	// A compaction cut short left its partial copy; the file at s.path
	// is the store (the copy is renamed only when complete).
	if err := os.Remove(compactTemp(s.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove a compaction's leftover: %w", err)
	}
	if err := s.openFile(opts, timeout); err != nil {
		return err
	}
	if err := s.rewrite(opts, timeout, opts.Rewrite); err != nil {
		if s.db != nil {
			s.db.Close()
			s.db = nil
		}
		return err
	}
	return nil
}

// openFile checks the data file, maps it and checks its records.
func (s *Store) openFile(opts Options, timeout time.Duration) error {
	if err := verifyPath(s.path); err != nil {
		if errors.Is(err, errFormat) {
			return fmt.Errorf("%v: %w", err, ErrCorrupt)
		}
		return err
	}
	err := guard(func() error {
		db, err := bolt.Open(s.path, 0o600, boltOptions(opts, timeout))
		if err != nil {
			return err
		}
		// Grown in small steps, the file reaches each tier's cap less
		// a step, not the power of two below it.
		db.AllocSize = int(s.allocSize())
		s.db = db
		return s.load()
	})
	if err != nil {
		if s.db != nil {
			s.db.Close()
			s.db = nil
		}
		return classify(err)
	}
	return nil
}

// load checks the schema version and every record, migrating first when
// the file is older.
func (s *Store) load() error {
	var version int
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		if version, err = readVersion(tx); err != nil {
			return err
		}
		if version > SchemaVersion {
			return fmt.Errorf("version %d, this binary knows up to %d: %w", version, SchemaVersion, ErrSchema)
		}
		if version < SchemaVersion {
			return nil // checked after migration
		}
		return checkRecords(tx)
	})
	if err != nil || version == SchemaVersion {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := migrate(tx, version); err != nil {
			return err
		}
		return checkRecords(tx)
	})
}

// guard runs fn, turning a panic or a memory fault inside it (bbolt on a
// file the walk let through) into ErrCorrupt instead of a crash.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt failed reading the file: %v: %w", r, ErrCorrupt)
		}
	}()
	return fn()
}

// classify maps bbolt's errors to this package's.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("data file: %w", ErrLocked)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return fmt.Errorf("%v: %w", err, ErrCorrupt)
	case errors.Is(err, berrors.ErrMaxSizeReached):
		return fmt.Errorf("data file at its size limit (%w): %w", ErrFull, ErrTooLarge)
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return ErrClosed
	}
	return err
}

// create builds a new store at path: under a temporary name first, then
// renamed into place and the directory synced, so that a crash leaves
// either no file or a complete one.
func create(path string, opts *bolt.Options) error {
	tmp := path + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove leftover %s: %w", tmp, err)
	}
	db, err := bolt.Open(tmp, 0o600, opts)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return migrate(tx, 0) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create store: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Path returns the data file's path.
func (s *Store) Path() string { return s.path }

// Close closes the data file and releases the lock.
func (s *Store) Close() error {
	err := s.db.Close()
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// update runs fn in a write transaction of tier t and maps the errors.
func (s *Store) update(op string, t tier, fn func(tx *bolt.Tx) error) error {
	s.wmu.Lock()
	s.db.MaxSize = int(s.capFor(t))
	err := s.db.Update(fn)
	s.wmu.Unlock()
	if err := classify(err); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return nil
}

func (s *Store) view(op string, fn func(tx *bolt.Tx) error) error {
	if err := classify(s.db.View(fn)); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return nil
}

// encode checks c against the limits and encodes it.
func (s *Store) encode(c *Claim) ([]byte, error) {
	if err := s.lim.check(c); err != nil {
		return nil, err
	}
	v, err := encodeClaim(c)
	if err != nil {
		return nil, fmt.Errorf("encode: %v: %w", err, ErrInvalid)
	}
	if len(v) > s.lim.MaxRecord {
		return nil, fmt.Errorf("record of %d bytes (limit %d): %w", len(v), s.lim.MaxRecord, ErrTooLarge)
	}
	return v, nil
}

// Put stores a new claim in one transaction. When c.ID is empty it
// assigns NewID(c.Kind); an empty State becomes Running and a zero
// CreatedAt the current time. On success c holds what was stored (ID, Rev
// 1, UpdatedAt). Errors wrap ErrExists, ErrInvalid or ErrTooLarge.
func (s *Store) Put(c *Claim) error {
	cc := *c
	if !cc.Kind.valid() {
		return fmt.Errorf("store: put: kind %q: %w", cc.Kind, ErrInvalid)
	}
	if cc.ID == "" {
		cc.ID = NewID(cc.Kind)
	}
	if cc.State == "" {
		cc.State = Running
	}
	now := time.Now()
	if cc.CreatedAt.IsZero() {
		cc.CreatedAt = now
	}
	cc.Rev, cc.UpdatedAt = 1, now
	v, err := s.encode(&cc)
	if err != nil {
		return fmt.Errorf("store: put %s: %w", cc.ID, err)
	}
	err = s.update("put "+cc.ID, grow, func(tx *bolt.Tx) error {
		claims, members, err := buckets(tx)
		if err != nil {
			return err
		}
		if claims.Get([]byte(cc.ID)) != nil {
			return ErrExists
		}
		if err := claims.Put([]byte(cc.ID), v); err != nil {
			return err
		}
		return putMembers(members, cc.ID, cc.Members)
	})
	if err != nil {
		return err
	}
	*c = cc
	return nil
}

func buckets(tx *bolt.Tx) (claims, members *bolt.Bucket, err error) {
	claims, members = tx.Bucket(bucketClaims), tx.Bucket(bucketMembers)
	if claims == nil || members == nil {
		return nil, nil, fmt.Errorf("missing claims or members bucket: %w", ErrCorrupt)
	}
	return claims, members, nil
}

func putMembers(b *bolt.Bucket, id string, ms []Member) error {
	for _, m := range ms {
		v, err := encodeMember(m)
		if err != nil {
			return err
		}
		if err := b.Put(memberKey(id, m.Pid, m.Token), v); err != nil {
			return err
		}
	}
	return nil
}

func encodeMember(m Member) ([]byte, error) {
	v, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode member: %v: %w", err, ErrInvalid)
	}
	return v, nil
}

// deleteMembers removes every member of claim id.
func deleteMembers(b *bolt.Bucket, id string) error {
	prefix := memberPrefix(id)
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// loadMembers returns the members of claim id in key (pid) order.
func loadMembers(b *bolt.Bucket, id string) ([]Member, error) {
	var ms []Member
	prefix := memberPrefix(id)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		_, m, err := decodeMember(k, v)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// get reads claim id with its members.
func get(tx *bolt.Tx, id string) (Claim, error) {
	claims, members, err := buckets(tx)
	if err != nil {
		return Claim{}, err
	}
	v := claims.Get([]byte(id))
	if v == nil {
		return Claim{}, ErrNotFound
	}
	c, err := decodeClaim([]byte(id), v)
	if err != nil {
		return Claim{}, err
	}
	if c.Members, err = loadMembers(members, id); err != nil {
		return Claim{}, err
	}
	return c, nil
}

// Get returns the claim with the ID. Errors wrap ErrNotFound or ErrCorrupt.
func (s *Store) Get(id string) (Claim, error) {
	var c Claim
	err := s.view("get "+id, func(tx *bolt.Tx) error {
		var err error
		c, err = get(tx, id)
		return err
	})
	return c, err
}

// Update reads claim id, lets fn change it, and writes it back, all in one
// transaction: concurrent Updates of a claim are serialised, none is lost.
// When fn returns an error nothing is written and Update returns that
// error unchanged. fn may change any field but ID and Kind (ErrInvalid);
// Rev and UpdatedAt are set by the store. Members are rewritten only when
// fn changed them. Errors wrap ErrNotFound, ErrInvalid, ErrTooLarge.
func (s *Store) Update(id string, fn func(*Claim) error) error {
	var fnErr error
	err := s.update("update "+id, change, func(tx *bolt.Tx) error {
		old, err := get(tx, id)
		if err != nil {
			return err
		}
		c := old
		c.Argv = append([]string(nil), old.Argv...)
		c.Members = append([]Member(nil), old.Members...)
		if fnErr = fn(&c); fnErr != nil {
			return fnErr
		}
		if c.ID != old.ID || c.Kind != old.Kind {
			return fmt.Errorf("id or kind changed to %q %q: %w", c.ID, c.Kind, ErrInvalid)
		}
		c.Rev, c.UpdatedAt = old.Rev+1, time.Now()
		v, err := s.encode(&c)
		if err != nil {
			return err
		}
		claims, members, _ := buckets(tx)
		if err := claims.Put([]byte(id), v); err != nil {
			return err
		}
		if slicesEqualMembers(old.Members, c.Members) {
			return nil
		}
		if err := deleteMembers(members, id); err != nil {
			return err
		}
		return putMembers(members, id, c.Members)
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

func slicesEqualMembers(a, b []Member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameMember(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Delete removes claim id and its members. Errors wrap ErrNotFound.
func (s *Store) Delete(id string) error {
	return s.update("delete "+id, shrink, func(tx *bolt.Tx) error {
		claims, members, err := buckets(tx)
		if err != nil {
			return err
		}
		if claims.Get([]byte(id)) == nil {
			return ErrNotFound
		}
		if err := claims.Delete([]byte(id)); err != nil {
			return err
		}
		return deleteMembers(members, id)
	})
}

// AddMember records descendants of claim id in one transaction and
// returns how many were new. It is idempotent on (pid, token): a member
// already recorded keeps its first record. The claim record itself is not
// rewritten (its Rev does not move), so the cost does not grow with the
// claim. Errors wrap ErrNotFound, ErrInvalid, or ErrTooLarge when the
// claim would pass Limits.MaxMembers (then none of ms is recorded).
func (s *Store) AddMember(id string, ms ...Member) (int, error) {
	for _, m := range ms {
		if err := s.lim.checkMember(m); err != nil {
			return 0, fmt.Errorf("store: add member to %s: %w", id, err)
		}
	}
	added := 0
	err := s.update("add member to "+id, change, func(tx *bolt.Tx) error {
		added = 0
		claims, members, err := buckets(tx)
		if err != nil {
			return err
		}
		if claims.Get([]byte(id)) == nil {
			return ErrNotFound
		}
		n := countPrefix(members, memberPrefix(id), s.lim.MaxMembers+1)
		for _, m := range ms {
			k := memberKey(id, m.Pid, m.Token)
			if members.Get(k) != nil {
				continue
			}
			if n >= s.lim.MaxMembers {
				return fmt.Errorf("claim has %d members (limit %d): %w", n, s.lim.MaxMembers, ErrTooLarge)
			}
			v, err := encodeMember(m)
			if err != nil {
				return err
			}
			if err := members.Put(k, v); err != nil {
				return err
			}
			n++
			added++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// RemoveMember forgets descendants of claim id (those that exited) and
// returns how many were recorded. Errors wrap ErrNotFound for the claim.
func (s *Store) RemoveMember(id string, is ...Instance) (int, error) {
	removed := 0
	err := s.update("remove member from "+id, shrink, func(tx *bolt.Tx) error {
		removed = 0
		claims, members, err := buckets(tx)
		if err != nil {
			return err
		}
		if claims.Get([]byte(id)) == nil {
			return ErrNotFound
		}
		for _, in := range is {
			k := memberKey(id, in.Pid, in.Token)
			if members.Get(k) == nil {
				continue
			}
			if err := members.Delete(k); err != nil {
				return err
			}
			removed++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return removed, nil
}

// countPrefix counts keys with prefix, stopping at limit.
func countPrefix(b *bolt.Bucket, prefix []byte, limit int) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, _ = c.Next() {
		n++
	}
	return n
}

// List returns the claims f selects, with their members, oldest first
// (by CreatedAt, then ID). Errors wrap ErrCorrupt.
func (s *Store) List(f Filter) ([]Claim, error) {
	var out []Claim
	err := s.view("list", func(tx *bolt.Tx) error {
		claims, members, err := buckets(tx)
		if err != nil {
			return err
		}
		return claims.ForEach(func(k, v []byte) error {
			c, err := decodeClaim(k, v)
			if err != nil {
				return err
			}
			if !f.match(&c) {
				return nil
			}
			if c.Members, err = loadMembers(members, c.ID); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Stats describes a store.
type Stats struct {
	SchemaVersion int
	Claims        int
	Members       int
	// Counts holds the number of claims by kind and state.
	Counts map[Kind]map[State]int
	// FileBytes is the data file's size on disk; DataBytes the part of it
	// bbolt has in use (high-water mark, free pages included).
	FileBytes int64
	DataBytes int64
}

// Usage returns the bytes of the data file in use (its pages up to the
// high-water mark, less those free or freed by the last transactions)
// and the size new claims may not grow the file past (less than
// Options.MaxFileSize by its reserves, and by how bbolt grows it). In use
// is what the next writes cannot reuse: a caller keeping room for its
// own writes refuses others' past a share of limit. Free pages are
// counted whether or not they are contiguous: records of many pages can
// find the file full before all of it is in use (a 256 KiB file of 16 KiB
// records at 58%). It reads the file's meta page and the freelist's
// counts, not the claims.
func (s *Store) Usage() (inUse, limit int64, err error) {
	err = s.view("usage", func(tx *bolt.Tx) error {
		inUse = tx.Size()
		return nil
	})
	if err != nil {
		return 0, s.growLimit(), err
	}
	return max(0, inUse-int64(s.db.Stats().FreeAlloc)), s.growLimit(), nil
}

func (s *Store) growLimit() int64 {
	return reach(s.capFor(grow), int64(s.db.AllocSize))
}

// Stats counts the claims by kind and state and measures the file.
func (s *Store) Stats() (Stats, error) {
	st := Stats{Counts: map[Kind]map[State]int{}}
	err := s.view("stats", func(tx *bolt.Tx) error {
		var err error
		if st.SchemaVersion, err = readVersion(tx); err != nil {
			return err
		}
		claims, members, err := buckets(tx)
		if err != nil {
			return err
		}
		st.DataBytes = tx.Size()
		st.Members = members.Stats().KeyN
		return claims.ForEach(func(k, v []byte) error {
			c, err := decodeClaim(k, v)
			if err != nil {
				return err
			}
			st.Claims++
			if st.Counts[c.Kind] == nil {
				st.Counts[c.Kind] = map[State]int{}
			}
			st.Counts[c.Kind][c.State]++
			return nil
		})
	})
	if err != nil {
		return Stats{}, err
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return Stats{}, fmt.Errorf("store: stats: %w", err)
	}
	st.FileBytes = fi.Size()
	return st, nil
}
