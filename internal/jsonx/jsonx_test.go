package jsonx

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type rec struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	tests := []struct {
		in   string
		max  int
		want rec
		ok   bool
	}{
		{`{"a":1}`, 100, rec{A: 1}, true},
		{" \n{\"a\":1,\"b\":\"x\"}\n\t", 100, rec{A: 1, B: "x"}, true},
		{`{"a":1,"c":2}`, 100, rec{}, false},   // unknown field
		{`{"a":1} {"a":2}`, 100, rec{}, false}, // a second value
		{`{"a":1} ]`, 100, rec{}, false},       // a stray bracket (dec.More says no more)
		{`{"a":1} }`, 100, rec{}, false},
		{`{"a":1} x`, 100, rec{}, false},
		{`{"a":"1"}`, 100, rec{}, false}, // wrong type
		{`{"a":`, 100, rec{}, false},
		{``, 100, rec{}, false},
		{`{"a":1}`, 6, rec{}, false}, // over the bound
		{`{"a":1}`, 7, rec{A: 1}, true},
	}
	for _, tt := range tests {
		var got rec
		err := Decode([]byte(tt.in), tt.max, &got)
		if (err == nil) != tt.ok {
			t.Errorf("Decode(%q, %d) = %v, want ok %v", tt.in, tt.max, err, tt.ok)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("Decode(%q, %d) gave %+v, want %+v", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestDecodeTooLarge(t *testing.T) {
	var v any
	err := Decode([]byte(`"`+strings.Repeat("a", 64)+`"`), 10, &v)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode(66 bytes, 10) = %v, want ErrTooLarge", err)
	}
}

// TestDecodeUnique: a key twice in one object, spelt alike or differing
// only in case (which encoding/json matches to one field, keeping the
// last), is refused; the same key in different objects is not.
func TestDecodeUnique(t *testing.T) {
	type inner struct {
		K string `json:"k"`
	}
	type rec struct {
		A     int     `json:"a"`
		Skip  string  `json:"skip"`
		In    inner   `json:"in"`
		Items []inner `json:"items"`
		Any   any     `json:"any"`
	}
	for _, tc := range []struct {
		in  string
		dup bool
	}{
		{`{"a":1,"in":{"k":"x"},"items":[{"k":"a"},{"k":"b"}],"any":{"a":1,"k":[{"a":2}]}}`, false},
		{`{"a":1,"a":2}`, true},
		{`{"a":1,"A":2}`, true},
		{`{"in":{"k":"x","K":"y"}}`, true},
		{`{"in":{"k":"x","\u212a":"y"}}`, true}, // the Kelvin sign folds to k
		{`{"skip":"x","ſkip":"y"}`, true},       // as does long s to s
		{`{"items":[{"k":"a","k":"b"}]}`, true},
		{`{"any":{"x":[1,{"y":2}],"x":3}}`, true},
		{`{"any":[{"x":1},{"x":2}],"a":1}`, false},
		{`{"a":1,"in":{"k":"x"},"any":"in"}`, false}, // a string value is no key
	} {
		var got rec
		err := DecodeUnique([]byte(tc.in), 1000, &got)
		if tc.dup != errors.Is(err, ErrDuplicateKey) {
			t.Errorf("DecodeUnique(%s) = %v, want a duplicate key: %v", tc.in, err, tc.dup)
		}
		if !tc.dup && err != nil {
			t.Errorf("DecodeUnique(%s) = %v", tc.in, err)
		}
	}
	var v any
	if err := DecodeUnique([]byte(`{"a":`), 100, &v); err == nil || errors.Is(err, ErrDuplicateKey) {
		t.Errorf("DecodeUnique of malformed input = %v, want the decoder's error", err)
	}
}

// FuzzDecodeUnique: DecodeUnique accepts no more than Decode does, and
// where it accepts, it decodes the same value; where it refuses a
// duplicate, encoding/json would have read two keys of one object alike.
func FuzzDecodeUnique(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"A":2}`, `{"x":{"a":[1,{"b":2,"b":3}]}}`, `[{"a":1},{"a":1}]`, `{"a":`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var u, d any
		uerr := DecodeUnique(b, 1<<16, &u)
		derr := Decode(b, 1<<16, &d)
		switch {
		case uerr == nil && derr != nil:
			t.Fatalf("DecodeUnique accepted %q, which Decode refuses: %v", b, derr)
		case uerr == nil && !reflect.DeepEqual(u, d):
			t.Fatalf("DecodeUnique(%q) = %v, Decode = %v", b, u, d)
		case errors.Is(uerr, ErrDuplicateKey) && derr != nil:
			t.Fatalf("DecodeUnique(%q) found a duplicate key in what Decode refuses: %v", b, derr)
		}
	})
}
