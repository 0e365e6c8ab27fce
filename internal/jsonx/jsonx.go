// Package jsonx decodes JSON strictly: the one decoder for what the
// supervisor reads from outside its own memory (API request bodies, the
// config file, store records). Strict means exactly one JSON value, no
// field the destination does not declare, nothing but white space after
// the value, and a bound on the input's size checked before any parsing.
//
// Limits: duplicate keys are not refused (encoding/json keeps the last),
// and key matching is case-insensitive, as encoding/json's is.
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
)

// ErrTooLarge is wrapped by Decode when the input is over its bound.
var ErrTooLarge = errors.New("JSON input too large")

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
