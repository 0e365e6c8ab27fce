package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingFileWithTraces: a data file moved away while its lock file,
// or the files of an evidence directory, stay is ErrMissing, not a new
// empty store ("reconciled 0 claims" with 23 jobs running).
func TestMissingFileWithTraces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.db")
	jobs := filepath.Join(dir, "jobs")
	opts := Options{Evidence: []string{jobs}}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("first Open = %v, want a new store", err)
	}
	s.Close()
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, opts)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), path+".lock") {
		t.Fatalf("Open with the file moved away = %v, want ErrMissing naming the lock file", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a store file was created: %v", err)
	}

	// The lock file removed, the jobs' output still says so.
	if err := os.Mkdir(jobs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobs, "j-aaaaaaaaaaaa.out"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + ".lock")
	_, err = Open(path, opts)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "j-aaaaaaaaaaaa.out") {
		t.Fatalf("Open with job output left = %v, want ErrMissing naming it", err)
	}
	if _, err := os.Stat(path + ".lock"); !os.IsNotExist(err) {
		t.Errorf("a refused first open left a lock file: %v", err)
	}

	// Every trace removed, as the message says: a new store.
	os.Remove(filepath.Join(jobs, "j-aaaaaaaaaaaa.out"))
	s, err = Open(path, opts)
	if err != nil {
		t.Fatalf("Open with no trace left = %v, want a new store", err)
	}
	s.Close()
	// The file put back is read again.
	if err := os.Rename(path+".moved", path); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, opts)
	if err != nil {
		t.Fatalf("Open with the file back = %v", err)
	}
	s.Close()
}

// TestFirstCreateCutShort: a lock file beside the leftover of a creation
// that did not finish (a crash in the first Open) is not the trace of a
// store.
func TestFirstCreateCutShort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.db")
	for _, p := range []string{path + ".lock", path + ".new"} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open after a first creation cut short = %v, want a new store", err)
	}
	s.Close()
}

// TestCompactionCutShortIsEvidence: a compaction killed midway leaves its
// partial copy. When the store's file is then gone, the copy and the lock
// file say a store was here (ErrMissing): before, compaction wrote under
// the name of create's leftover, which says no store was made yet, and
// an empty store took the place of the one that held the claims. With
// the file there, Open removes the copy.
func TestCompactionCutShortIsEvidence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(&Claim{Kind: Job, Argv: []string{"make"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(compactTemp(path), []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	// With the file there: the store opens and the copy is gone.
	if s, err = Open(path, Options{}); err != nil {
		t.Fatalf("Open beside a compaction's leftover = %v", err)
	}
	s.Close()
	if _, err := os.Lstat(compactTemp(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the compaction's leftover is still there: %v", err)
	}
	// Without it, and without the lock file: the leftover is evidence
	// enough.
	if err := os.WriteFile(compactTemp(path), []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".lock"} {
		if err := os.Rename(p, p+".moved"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrMissing) {
		t.Fatalf("Open with the file gone after a compaction cut short = %v, want ErrMissing", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open made a store in the missing one's place: %v", err)
	}
}
