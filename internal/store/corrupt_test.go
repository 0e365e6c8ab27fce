package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// makeStore creates a closed store with some claims and members and
// returns its path.
func makeStore(t testing.TB, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		c := fullGrant()
		if i%2 == 1 {
			c.Kind = Job
		}
		c.Pid = int32(1000 + i)
		if err := s.Put(&c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddMember(c.ID, Member{Pid: int32(5000 + i), Token: tk("m")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawEdit changes the file through bbolt directly, bypassing the store.
func rawEdit(t testing.TB, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func putRaw(bucket, key, val string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return errors.New("no bucket " + bucket)
		}
		return b.Put([]byte(key), []byte(val))
	}
}

// fileState is what must not change when Open refuses a file.
type fileState struct {
	data  []byte
	mtime time.Time
	mode  os.FileMode
}

func snapshot(t testing.TB, path string) fileState {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	if fi.Mode().IsRegular() {
		if data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	return fileState{data, fi.ModTime(), fi.Mode()}
}

func pageSizeOf(t testing.TB, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	return int64(m.pageSize)
}

func TestOpenCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"garbage bytes", func(t *testing.T, path string) {
			b := make([]byte, 64<<10)
			r := rand.NewChaCha8([32]byte{1})
			r.Read(b)
			writeFile(t, path, b)
		}},
		{"text file", func(t *testing.T, path string) { writeFile(t, path, []byte("not a database\n")) }},
		{"empty file", func(t *testing.T, path string) { writeFile(t, path, nil) }},
		{"truncated to 100 bytes", truncateTo(100)},
		{"truncated to one page", func(t *testing.T, path string) { truncateTo(pageSizeOf(t, path))(t, path) }},
		{"truncated to half", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			truncateTo(fi.Size()/2)(t, path)
		}},
		{"truncated below the high-water mark", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			m0, _ := parseMeta(b)
			m1, _ := parseMeta(b[m0.pageSize:])
			truncateTo(int64(max(m0.pgid, m1.pgid)-1)*int64(m0.pageSize))(t, path)
		}},
		{"both meta pages damaged", func(t *testing.T, path string) {
			ps := pageSizeOf(t, path)
			patch(t, path, 16+20, []byte{0xff})
			patch(t, path, ps+16+20, []byte{0xff})
		}},
		{"data page header zeroed", func(t *testing.T, path string) {
			ps := pageSizeOf(t, path)
			for p := int64(2); p < 6; p++ {
				patch(t, path, p*ps, make([]byte, 16))
			}
		}},
		{"leaf element offset out of its page", func(t *testing.T, path string) {
			ps := pageSizeOf(t, path)
			b, _ := os.ReadFile(path)
			for p := int64(2); p*ps < int64(len(b)); p++ {
				pg := b[p*ps:]
				if binary.NativeEndian.Uint16(pg[8:]) == leafFlag && binary.NativeEndian.Uint16(pg[10:]) > 0 {
					patch(t, path, p*ps+16+4, []byte{0xff, 0xff, 0xff, 0x7f})
					return
				}
			}
			t.Fatal("no leaf page found")
		}},
		{"garbage claim record", func(t *testing.T, path string) {
			rawEdit(t, path, putRaw("claims", NewID(Grant), "\x00\x01garbage"))
		}},
		{"claim under another id", func(t *testing.T, path string) {
			rawEdit(t, path, putRaw("claims", NewID(Grant), `{"id":"g-aaaaaaaaaaaa","kind":"grant","state":"running"}`))
		}},
		{"claim with unknown field", func(t *testing.T, path string) {
			id := NewID(Job)
			rawEdit(t, path, putRaw("claims", id, `{"id":"`+id+`","kind":"job","state":"running","colour":"red"}`))
		}},
		{"claim with unknown state", func(t *testing.T, path string) {
			id := NewID(Job)
			rawEdit(t, path, putRaw("claims", id, `{"id":"`+id+`","kind":"job","state":"zombie"}`))
		}},
		{"claim with trailing data", func(t *testing.T, path string) {
			id := NewID(Job)
			rawEdit(t, path, putRaw("claims", id, `{"id":"`+id+`","kind":"job","state":"running"} {}`))
		}},
		{"claim with bytes that are not UTF-8", func(t *testing.T, path string) {
			id := NewID(Job)
			rawEdit(t, path, putRaw("claims", id, `{"id":"`+id+`","kind":"job","state":"running","owner":"`+"\xff"+`"}`))
		}},
		{"claim with bad verdict word", func(t *testing.T, path string) {
			id := NewID(Job)
			rawEdit(t, path, putRaw("claims", id, `{"id":"`+id+`","kind":"job","state":"running","last_verdict":{"verdict":"MAYBE"}}`))
		}},
		{"member of no claim", func(t *testing.T, path string) {
			id := NewID(Job)
			rawEdit(t, path, putRaw("members", string(memberKey(id, 5, tk("t"))), `{"pid":5,"token":"`+tk("t").String()+`","parent":0}`))
		}},
		{"member under the wrong key", func(t *testing.T, path string) {
			rawEdit(t, path, putRaw("members", "nonsense", `{"pid":5,"token":"t","parent":0}`))
		}},
		{"schema version unreadable", func(t *testing.T, path string) {
			rawEdit(t, path, putRaw("meta", "schema_version", "one"))
		}},
		{"schema version zero", func(t *testing.T, path string) {
			rawEdit(t, path, putRaw("meta", "schema_version", "0"))
		}},
		{"no meta bucket", func(t *testing.T, path string) {
			rawEdit(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("meta")) })
		}},
		{"no members bucket", func(t *testing.T, path string) {
			rawEdit(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("members")) })
		}},
		{"another program's bbolt file", func(t *testing.T, path string) {
			os.Remove(path)
			rawEdit(t, path, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("settings"))
				if err != nil {
					return err
				}
				return b.Put([]byte("a"), []byte("b"))
			})
		}},
		{"a directory", func(t *testing.T, path string) {
			os.Remove(path)
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := makeStore(t, 12)
			tt.damage(t, path)
			before := snapshot(t, path)
			for range 2 { // refused twice: the first refusal released its locks
				s, err := Open(path, Options{})
				if err == nil {
					s.Close()
					t.Fatalf("Open(%s) succeeded on a damaged file", tt.name)
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open(%s) = %v, want ErrCorrupt", tt.name, err)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("Open error %q does not name the file", err)
				}
			}
			after := snapshot(t, path)
			if !bytes.Equal(before.data, after.data) || !before.mtime.Equal(after.mtime) || before.mode != after.mode {
				t.Errorf("Open changed the refused file (size %d -> %d, mtime %v -> %v)",
					len(before.data), len(after.data), before.mtime, after.mtime)
			}
		})
	}
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncateTo(n int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		if err := os.Truncate(path, n); err != nil {
			t.Fatal(err)
		}
	}
}

func patch(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A torn write of the newest meta page (a crash inside a commit) is not
// corruption: bbolt falls back to the other meta page, the previous
// transaction.
func TestOpenTornMeta(t *testing.T) {
	path := makeStore(t, 10)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := pageSizeOf(t, path)
	m0, _ := parseMeta(b)
	m1, _ := parseMeta(b[ps:])
	newest := int64(0)
	if m1.txid > m0.txid {
		newest = 1
	}
	patch(t, path, newest*ps+16+60, []byte{0xde, 0xad}) // inside the checksum
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open with the newest meta page torn = %v, want the previous transaction", err)
	}
	defer s.Close()
	st, err := s.Stats()
	if err != nil || st.Claims < 9 {
		t.Errorf("Stats = %+v, %v; want at least 9 of 10 claims", st, err)
	}
}

func TestOpenSchemaNewer(t *testing.T) {
	path := makeStore(t, 3)
	rawEdit(t, path, putRaw("meta", "schema_version", strconv.Itoa(SchemaVersion+1)))
	before := snapshot(t, path)
	s, err := Open(path, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
	if !errors.Is(err, ErrSchema) || errors.Is(err, ErrCorrupt) {
		t.Errorf("Open of a newer schema = %v, want ErrSchema only", err)
	}
	if after := snapshot(t, path); !bytes.Equal(before.data, after.data) {
		t.Error("Open changed a store of a newer schema")
	}
}

func TestOpenLocked(t *testing.T) {
	s, path := openTemp(t, Options{})
	_, err := Open(path, Options{LockTimeout: 20 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("ErrLocked message %q does not name the holder (%s)", err, want)
	}
	if _, err := Open(path, Options{LockTimeout: -1}); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open without waiting = %v, want ErrLocked", err)
	}
	// The first store still works, and after Close the next Open succeeds.
	if err := s.Put(&Claim{Kind: Job}); err != nil {
		t.Fatalf("Put on the holder after a refused Open = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	s2.Close()
}

// A program that ignores the lock file but takes bbolt's flock (the bbolt
// CLI) also keeps the daemon out.
func TestOpenLockedByBolt(t *testing.T) {
	path := makeStore(t, 1)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Open(path, Options{LockTimeout: 20 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Errorf("Open while bbolt holds the file = %v, want ErrLocked", err)
	}
}

func TestAcquire(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	l, err := Acquire(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(path, 15*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Errorf("Acquire of a held lock = %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	l2, err := Acquire(path, 0)
	if err != nil {
		t.Fatalf("Acquire after Close = %v", err)
	}
	l2.Close()
	if _, err := Acquire(filepath.Join(t.TempDir(), "no", "such", "dir"), 0); err == nil || errors.Is(err, ErrLocked) {
		t.Errorf("Acquire in a missing directory = %v, want an I/O error", err)
	}
}

// A leftover temporary file from a crash during creation is replaced.
func TestCreateAfterCrashedCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	writeFile(t, path+".new", []byte("half a database"))
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open with a leftover temporary file = %v", err)
	}
	s.Close()
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Errorf("leftover temporary file still there: %v", err)
	}
}
