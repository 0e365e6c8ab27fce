package verdict

import (
	"encoding/json"
	"testing"
)

// FuzzParseResult checks that ParseResult accepts exactly the four verdict
// words, each to the result whose String it is (so Parse(String(r)) == r
// and the word is the only text of r: no case folding, no spaces), that
// what it refuses is an error and no result; and that UnmarshalText, alone
// and under encoding/json, agrees with it on every input.
func FuzzParseResult(f *testing.F) {
	for _, s := range []string{
		"OWNED", "FOREIGN", "GONE", "UNVERIFIABLE", // the words (the CLI and API tests' verdicts)
		"", "INVALID", "owned", "Owned", " OWNED", "OWNED ", "OWNED\x00", "GONE,FOREIGN", "UNVERIFIABLE\n", "0", "1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseResult(s)
		if err != nil {
			if r != 0 {
				t.Fatalf("ParseResult(%q) = %v (%d) with error %v, want no result", s, r, r, err)
			}
			for _, w := range []Result{Owned, Foreign, Gone, Unverifiable} {
				if s == w.String() {
					t.Fatalf("ParseResult(%q) refused the word of %d: %v", s, w, err)
				}
			}
		} else {
			if r < Owned || r > Unverifiable {
				t.Fatalf("ParseResult(%q) = %d, not a result", s, r)
			}
			if r.String() != s {
				t.Fatalf("ParseResult(%q) = %d, whose String is %q", s, r, r.String())
			}
			if back, err := ParseResult(r.String()); err != nil || back != r {
				t.Fatalf("ParseResult(%q) = %v, %v; want %v", r.String(), back, err, r)
			}
			if text, err := r.MarshalText(); err != nil || string(text) != s {
				t.Fatalf("MarshalText of %v = %q, %v; want %q", r, text, err, s)
			}
		}

		// UnmarshalText agrees with ParseResult. On an error only the
		// error is compared: what the receiver holds then is not a
		// promise of either.
		u := Unverifiable
		uerr := u.UnmarshalText([]byte(s))
		if (uerr == nil) != (err == nil) || err == nil && u != r {
			t.Fatalf("UnmarshalText(%q) = %v, %v; ParseResult = %v, %v", s, u, uerr, r, err)
		}

		// So does a JSON string, which encoding/json hands to UnmarshalText.
		js, jerr := json.Marshal(s)
		if jerr != nil {
			t.Fatalf("json.Marshal(%q) = %v", s, jerr)
		}
		var v struct {
			R Result `json:"verdict"`
		}
		jerr = json.Unmarshal([]byte(`{"verdict":`+string(js)+`}`), &v)
		// encoding/json replaces invalid UTF-8 with U+FFFD, which is no
		// verdict word either way.
		if (jerr == nil) != (err == nil) || err == nil && v.R != r {
			t.Fatalf("json.Unmarshal of %s = %v, %v; ParseResult(%q) = %v, %v", js, v.R, jerr, s, r, err)
		}
	})
}

// TestResultTextEveryValue: the fuzzer's other direction, over every value
// of the type: the text of a result parses back to it, and every other
// value prints as INVALID, which nothing parses.
func TestResultTextEveryValue(t *testing.T) {
	for i := range 256 {
		r := Result(i)
		back, err := ParseResult(r.String())
		valid := r >= Owned && r <= Unverifiable
		switch {
		case valid && (err != nil || back != r):
			t.Errorf("ParseResult(%q) = %v, %v; want %d", r.String(), back, err, i)
		case !valid && (err == nil || r.String() != "INVALID"):
			t.Errorf("Result(%d) prints %q, which parses to %v, %v; want INVALID, refused", i, r.String(), back, err)
		}
	}
}
