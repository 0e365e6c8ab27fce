package store

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// An argv of the API's 32 KiB of '<' was encoded HTML-escaped, six bytes
// each, and a record of 192 KiB passed the store's 64 KiB.
func TestRecordNotHTMLEscaped(t *testing.T) {
	s, _ := openTemp(t, Options{})
	argv := []string{"/bin/true"}
	for _, ch := range []string{"<", ">", "&", "<", ">", "&", "<", ">"} {
		argv = append(argv, strings.Repeat(ch, 4000))
	}
	c := Claim{Kind: Grant, Argv: argv, Cwd: "/a&b<c>"}
	if err := s.Put(&c); err != nil {
		t.Fatalf("Put(argv of 32000 '<>&') = %v, want it stored", err)
	}
	n, err := RecordSize(&c)
	if err != nil || n > 33<<10 {
		t.Errorf("RecordSize = %d, %v; want under 33 KiB", n, err)
	}
	got, err := s.Get(c.ID)
	if err != nil || !slices.Equal(got.Argv, argv) || got.Cwd != c.Cwd {
		t.Fatalf("Get = %q %q, %v; want the argv and cwd as put", got.Argv, got.Cwd, err)
	}
	// Characters JSON must escape still are (a record is valid JSON).
	c2 := Claim{Kind: Grant, Argv: []string{"a\x01\"\\\u2028"}}
	if err := s.Put(&c2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(c2.ID); err != nil || got.Argv[0] != c2.Argv[0] {
		t.Errorf("Get = %q, %v; want %q", got.Argv, err, c2.Argv)
	}
	if err := s.Put(&Claim{Kind: Grant, Argv: []string{strings.Repeat("\x01", 4000), strings.Repeat("\x01", 4000), strings.Repeat("\x01", 4000)}}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put(12000 control characters) = %v, want ErrTooLarge (6 bytes each)", err)
	} else if strings.Contains(err.Error(), s.Path()) {
		t.Errorf("Put error %q names the store's path", err)
	}
}

// Records the store wrote before, HTML-escaped, are read as they were,
// and rewritten unescaped by the next Update.
func TestReadsHTMLEscapedRecords(t *testing.T) {
	s, path := openTemp(t, Options{})
	c := Claim{ID: NewID(Job), Kind: Job, State: Running, Argv: []string{"sh", "-c", "a < b && c > d"}, Rev: 1}
	old, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(old), `\u003c`) {
		t.Fatalf("json.Marshal gave %s, want it escaped", old)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketClaims).Put([]byte(c.ID), old) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("Open of a store with an escaped record = %v", err)
	}
	defer s.Close()
	got, err := s.Get(c.ID)
	if err != nil || !slices.Equal(got.Argv, c.Argv) {
		t.Fatalf("Get = %q, %v; want %q", got.Argv, err, c.Argv)
	}
	if err := s.Update(c.ID, func(x *Claim) error { x.FollowedUp = true; return nil }); err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketClaims).Get([]byte(c.ID)); !strings.Contains(string(v), "a < b && c > d") {
			t.Errorf("record after Update = %s, want the argv unescaped", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
