package jsonx

import (
	"errors"
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
