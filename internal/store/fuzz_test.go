package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzOpen feeds arbitrary files to Open: it must either open them or
// refuse them with ErrCorrupt (or ErrSchema), never crash, and never change
// a file it refused. Seeds include a real store, so mutations reach the
// page walk and the record decoders.
func FuzzOpen(f *testing.F) {
	path := makeStore(f, 6)
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Options{LockTimeout: -1})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSchema) {
				t.Fatalf("Open = %v, want ErrCorrupt or ErrSchema", err)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, data) {
				t.Fatalf("Open changed a refused file (%v)", rerr)
			}
			return
		}
		defer s.Close()
		if _, err := s.List(Filter{}); err != nil {
			t.Fatalf("List on an opened store = %v", err)
		}
		if _, err := s.Stats(); err != nil {
			t.Fatalf("Stats on an opened store = %v", err)
		}
	})
}

// FuzzDecodeClaim: decoding never panics, and what decodes re-encodes to
// the same claim.
func FuzzDecodeClaim(f *testing.F) {
	c := fullGrant()
	c.ID = "g-abcdefghijkl"
	v, err := encodeClaim(&c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(c.ID), v)
	f.Add([]byte("j-aaaaaaaaaaaa"), []byte(`{"id":"j-aaaaaaaaaaaa","kind":"job","state":"exited","exit_code":0}`))
	f.Fuzz(func(t *testing.T, key, val []byte) {
		c, err := decodeClaim(key, val)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeClaim error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		v, err := encodeClaim(&c)
		if err != nil {
			t.Fatalf("re-encode of a decoded claim: %v", err)
		}
		back, err := decodeClaim(key, v)
		if err != nil {
			t.Fatalf("decode of a re-encoded claim %s: %v", v, err)
		}
		if !claimsEqual(back, c) {
			t.Fatalf("round trip changed the claim:\n%+v\n%+v", c, back)
		}
	})
}

// FuzzDecodeMember: decoding never panics; a decoded member sits under
// its own key.
func FuzzDecodeMember(f *testing.F) {
	f.Add(memberKey("g-abcdefghijkl", 42, tk("tok")), []byte(`{"pid":42,"token":"`+tk("tok").String()+`","parent":1}`))
	f.Add([]byte("g-abcdefghijkl/"), []byte(`{}`))
	f.Fuzz(func(t *testing.T, key, val []byte) {
		id, m, err := decodeMember(key, val)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeMember error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if got := memberKey(id, m.Pid, m.Token); !bytes.Equal(got, key) {
			t.Fatalf("decoded member %+v of %s belongs under %q, found under %q", m, id, got, key)
		}
		v, err := encodeMember(m)
		if err != nil {
			t.Fatal(err)
		}
		_, back, err := decodeMember(key, v)
		if err != nil || !reflect.DeepEqual(back.BornAt.UTC(), m.BornAt.UTC()) || back.Pid != m.Pid || back.Token != m.Token {
			t.Fatalf("round trip of %+v = %+v, %v", m, back, err)
		}
	})
}

// FuzzParseMeta: the meta page parser never panics and accepts only pages
// whose checksum holds.
func FuzzParseMeta(f *testing.F) {
	path := makeStore(f, 0)
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:pageHeaderSize+metaSize])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeta(b)
		if err != nil {
			if !errors.Is(err, errFormat) {
				t.Fatalf("parseMeta error %v does not wrap errFormat", err)
			}
			return
		}
		if ne.Uint32(b[16:]) != boltMagic || ne.Uint32(b[20:]) != boltVersion || m.pageSize != ne.Uint32(b[24:]) {
			t.Fatalf("parseMeta accepted %x as %+v", b[:pageHeaderSize+metaSize], m)
		}
	})
}
