package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// streamKindsRef is a reference reading of a ?kind= list: the set it names
// and whether every name in it is known.
func streamKindsRef(s string) (StreamKinds, bool) {
	if s == "" {
		return 0, true
	}
	k := streamLostOnly
	for _, name := range strings.Split(s, ",") {
		switch name {
		case "lost":
		case "fork":
			k |= StreamFork
		case "exec":
			k |= StreamExec
		case "exit":
			k |= StreamExit
		case "claim":
			k |= StreamClaim
		default:
			return 0, false
		}
	}
	return k, true
}

// FuzzParseStreamKinds checks ParseStreamKinds against a reference reading
// of the list: it accepts exactly the lists whose every name is a known
// kind, giving the set they name; a refusal wraps ErrBadRequest (a 400 to
// the subscriber) and subscribes nothing; a non-empty list never becomes
// the zero set (which means every kind); Has agrees with the names given;
// and a parsed set's String parses back to the same set, String being a
// fixed point.
func FuzzParseStreamKinds(f *testing.F) {
	for _, s := range []string{
		"", "exit", "fork,exit,lost", "lost", "claim,exec", // good, TestStreamKinds
		"exits", "exit,", // bad, TestStreamKinds
		"fork,exec,exit,claim", "lost,lost", "exit,exit", ",", "Fork", " exit", "exit ", "fork,,exec", "lost,fork,exec,exit,claim,bogus",
	} {
		f.Add(s)
	}
	known := StreamFork | StreamExec | StreamExit | StreamClaim | streamLostOnly
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseStreamKinds(s)
		want, ok := streamKindsRef(s)
		if err != nil {
			if ok {
				t.Fatalf("ParseStreamKinds(%q) = %v, refusing a list of known kinds (want %v)", s, err, want)
			}
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("ParseStreamKinds(%q) error %v does not wrap ErrBadRequest", s, err)
			}
			if status, code := kindOf(err); status != http.StatusBadRequest || code != CodeBadRequest {
				t.Fatalf("ParseStreamKinds(%q) error %v answers %d %s, want 400 %s", s, err, status, code, CodeBadRequest)
			}
			if k != 0 {
				t.Fatalf("ParseStreamKinds(%q) = %#x with error %v, want 0", s, uint8(k), err)
			}
			return
		}
		if !ok {
			t.Fatalf("ParseStreamKinds(%q) = %#x, accepting an unknown kind", s, uint8(k))
		}
		if k != want {
			t.Fatalf("ParseStreamKinds(%q) = %#x, want %#x", s, uint8(k), uint8(want))
		}
		if s != "" && k == 0 {
			t.Fatalf("ParseStreamKinds(%q) = every kind, for a non-empty list", s)
		}
		if k&^known != 0 {
			t.Fatalf("ParseStreamKinds(%q) = %#x, bits outside the known kinds", s, uint8(k))
		}
		names := strings.Split(s, ",")
		for _, x := range streamKindNames {
			given := s == "" || strings.Contains(","+s+",", ","+x.name+",")
			if k.Has(x.k) != given {
				t.Fatalf("ParseStreamKinds(%q).Has(%s) = %v, want %v (names %q)", s, x.name, k.Has(x.k), given, names)
			}
		}
		str := k.String()
		back, err := ParseStreamKinds(str)
		if err != nil || back != k {
			t.Fatalf("ParseStreamKinds(%q) = %#x; its String %q parses to %#x, %v", s, uint8(k), str, uint8(back), err)
		}
		if again := back.String(); again != str {
			t.Fatalf("String of %#x is %q, then %q", uint8(k), str, again)
		}
	})
}

// FuzzDurationUnmarshalText checks Duration.UnmarshalText against
// time.ParseDuration: it accepts exactly the text of at most
// maxDurationText bytes that ParseDuration reads as a non-negative
// duration (overflow is ParseDuration's error), giving that duration; a
// refusal leaves the receiver as it was; Set agrees with it; and what it
// accepts round-trips through MarshalText (and JSON) to the same value,
// MarshalText being String and a fixed point.
func FuzzDurationUnmarshalText(f *testing.F) {
	for _, s := range []string{
		"1s", "0s", "90s", "1h0m0s", // good, TestDurationText and TestDurationFlagValue
		"-1s", "soon", strings.Repeat("1", 100) + "s", // bad, TestDurationText
		"0", "-0", "-0s", "1.5h", ".5s", "1h2m3s4ms5us6ns", "1µs", "1μs",
		"2562047h47m16.854775807s", "2562047h47m16.854775808s", "9223372036854775807ns", "9223372036854775808ns",
		"-9223372036854775808ns", "+5m", "1e3s", " 1s", "1s ", "",
		strings.Repeat("0", 62) + "1s", strings.Repeat("0", 63) + "1s",
	} {
		f.Add(s)
	}
	const sentinel = Duration(7 * time.Millisecond)
	f.Fuzz(func(t *testing.T, s string) {
		d := sentinel
		err := d.UnmarshalText([]byte(s))

		ref, refErr := time.ParseDuration(s)
		wantOK := len(s) <= maxDurationText && refErr == nil && ref >= 0

		d2 := sentinel
		if err2 := d2.Set(s); (err2 == nil) != (err == nil) || d2 != d {
			t.Fatalf("Set(%q) = %v, %v; UnmarshalText = %v, %v", s, d2, err2, d, err)
		}
		if err != nil {
			if wantOK {
				t.Fatalf("UnmarshalText(%q) = %v, want %v", s, err, ref)
			}
			if d != sentinel {
				t.Fatalf("UnmarshalText(%q) failed (%v) but changed the receiver to %v", s, err, time.Duration(d))
			}
			return
		}
		if !wantOK {
			t.Fatalf("UnmarshalText(%q) = %v, want an error (%d bytes, ParseDuration %v, %v)", s, time.Duration(d), len(s), ref, refErr)
		}
		if time.Duration(d) != ref || d < 0 {
			t.Fatalf("UnmarshalText(%q) = %v, want %v", s, time.Duration(d), ref)
		}

		text, err := d.MarshalText()
		if err != nil || string(text) != d.String() || d.String() != time.Duration(d).String() {
			t.Fatalf("MarshalText of %v = %q, %v; String %q", time.Duration(d), text, err, d.String())
		}
		var back Duration
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v (from %q)", text, time.Duration(back), err, time.Duration(d), s)
		}
		if again, _ := back.MarshalText(); string(again) != string(text) {
			t.Fatalf("MarshalText of %v is %q, then %q", time.Duration(d), text, again)
		}

		js, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("json.Marshal(%v) = %v", time.Duration(d), err)
		}
		var fromJSON Duration
		if err := json.Unmarshal(js, &fromJSON); err != nil || fromJSON != d {
			t.Fatalf("json.Unmarshal(%s) = %v, %v; want %v", js, time.Duration(fromJSON), err, time.Duration(d))
		}
	})
}

// FuzzDurationMarshalText checks the other direction, from every value: the
// text MarshalText writes is accepted back by UnmarshalText, to the same
// value, exactly when the duration is not negative (negative durations are
// refused, as --grace -1s is), and it always fits maxDurationText.
func FuzzDurationMarshalText(f *testing.F) {
	for _, n := range []int64{
		0, 1, int64(time.Second), int64(90 * time.Second), int64(time.Hour), int64(MaxWallClock), int64(MaxGrace),
		-1, -int64(time.Second), math.MaxInt64, math.MinInt64, math.MinInt64 + 1,
	} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := Duration(n)
		text, err := d.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText of %v = %v", time.Duration(n), err)
		}
		if len(text) > maxDurationText {
			t.Fatalf("MarshalText of %v = %q, longer than the %d bytes UnmarshalText reads", time.Duration(n), text, maxDurationText)
		}
		back := Duration(-42)
		err = back.UnmarshalText(text)
		switch {
		case n >= 0 && (err != nil || back != d):
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, time.Duration(back), err, time.Duration(n))
		case n < 0 && err == nil:
			t.Fatalf("UnmarshalText(%q) = %v, accepting a negative duration", text, time.Duration(back))
		case n < 0 && back != Duration(-42):
			t.Fatalf("UnmarshalText(%q) failed (%v) but changed the receiver to %v", text, err, time.Duration(back))
		}
	})
}
