// Package jsonx decodes JSON strictly: the one decoder for what the
// supervisor reads from outside its own memory (API request bodies, the
// config file, store records). Strict means exactly one JSON value, no
// field the destination does not declare, nothing but white space after
// the value, and a bound on the input's size checked before any parsing.
//
// DecodeUnique is Decode that also refuses an object with two keys that
// differ at most in case: encoding/json keeps the last of them (and
// matches keys without regard to case), so {"grace":"5s","grace":"1s"}
// read as 1s and {"argv":["a"],"Argv":["b"]} ran b. It scans the input
// once more, for what people write (API requests, the config file).
//
// Limits: Decode, for the daemon's own store records, does not look for
// duplicate keys; key matching is case-insensitive, as encoding/json's is.
//
// It also holds the string appenders of hand-written JSON encoders (see
// encode.go): escaping that always gives valid UTF-8 JSON.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// ErrTooLarge is wrapped by Decode when the input is over its bound.
var ErrTooLarge = errors.New("JSON input too large")

// ErrDuplicateKey is wrapped by DecodeUnique for an object with a key twice.
var ErrDuplicateKey = errors.New("duplicate key")

// Decode decodes b, which must hold exactly one JSON value of at most max
// bytes, into v, refusing unknown object fields and trailing data. Its
// errors are those of encoding/json for malformed or mistyped input, or
// wrap ErrTooLarge.
func Decode(b []byte, max int, v any) error {
	if len(b) > max {
		return fmt.Errorf("%d bytes, limit %d: %w", len(b), max, ErrTooLarge)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Token, unlike More, also refuses a stray closing bracket.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// DecodeUnique is Decode, refusing as well an object that has a key twice,
// spelt alike or differing only in case (ErrDuplicateKey).
func DecodeUnique(b []byte, max int, v any) error {
	if len(b) > max {
		return fmt.Errorf("%d bytes, limit %d: %w", len(b), max, ErrTooLarge)
	}
	if err := uniqueKeys(b); err != nil && json.Valid(b) {
		return err // malformed input is the decoder's to describe
	}
	return Decode(b, max, v)
}

// uniqueKeys walks the tokens of b, keeping the keys seen in each object
// open on the way, and refuses the first key seen twice in one object.
// Malformed input is left to the decoder's own errors.
func uniqueKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	// One frame per open object or array; keys is nil for an array.
	type frame struct {
		keys   map[string]bool
		getKey bool // an object's next string token is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // EOF, or malformed: Decode says what
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if n := len(stack); n > 0 && stack[n-1].keys != nil {
					stack[n-1].getKey = true // the object is the value
				}
				stack = append(stack, frame{keys: map[string]bool{}, getKey: true})
			case '[':
				if n := len(stack); n > 0 && stack[n-1].keys != nil {
					stack[n-1].getKey = true
				}
				stack = append(stack, frame{})
			default:
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			}
		default:
			n := len(stack)
			if n == 0 || stack[n-1].keys == nil {
				continue
			}
			f := &stack[n-1]
			if !f.getKey {
				f.getKey = true // a value: a key comes next
				continue
			}
			key, _ := t.(string)
			k := fold(key)
			if f.keys[k] {
				return fmt.Errorf("key %q: %w", key, ErrDuplicateKey)
			}
			f.keys[k] = true
			f.getKey = false
		}
	}
}

// fold maps each rune of s to the least rune of its Unicode simple case
// folding orbit: fold(x) == fold(y) exactly when strings.EqualFold(x, y),
// the match encoding/json makes between a key and a field name ("K", "k"
// and the Kelvin sign alike).
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		return m
	}, s)
}
