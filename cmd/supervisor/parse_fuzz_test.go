package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/token"
)

// pidRef is a reference reading of a pid argument: the pid, and whether s
// is one. parsePid's normalisation is Unicode space around the number
// (strings.TrimSpace), a '+' sign and leading zeros; the value must be
// 1..pidfd.MaxPid.
func pidRef(s string) (int32, bool) {
	d := strings.TrimSpace(s)
	neg := false
	if d != "" && (d[0] == '+' || d[0] == '-') {
		neg = d[0] == '-'
		d = d[1:]
	}
	if d == "" || strings.Trim(d, "0123456789") != "" {
		return 0, false
	}
	d = strings.TrimLeft(d, "0")
	if neg || d == "" || len(d) > len(strconv.Itoa(pidfd.MaxPid)) {
		return 0, false
	}
	v, _ := strconv.Atoi(d)
	if v > pidfd.MaxPid {
		return 0, false
	}
	return int32(v), true
}

// exitCodeOf is the exit code an error of a command ends the CLI with, -1
// when it carries none.
func exitCodeOf(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return -1
}

// FuzzParsePid checks parsePid against pidRef: it accepts exactly the
// decimal numbers 1..pidfd.MaxPid (after the normalisation pidRef
// describes), to their value, which prints back (strconv.Itoa) as the
// input with that normalisation undone and parses again to itself; and
// refuses everything else with exit code 64 (exitUsage) and pid 0.
func FuzzParsePid(f *testing.F) {
	for _, s := range []string{
		"1", "abc", "0", "99999999999", // main_test.go: token/verify PID arguments
		"4194304", "4194305", "-1", "-0", "+1", "007", " 42\n", "\u00a042\u3000", "1_000", "0x10", "1e3", "",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "٣",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pid, err := parsePid(s)
		want, ok := pidRef(s)
		if err != nil {
			if ok {
				t.Fatalf("parsePid(%q) = %v, want %d", s, err, want)
			}
			if pid != 0 {
				t.Fatalf("parsePid(%q) = %d with error %v, want 0", s, pid, err)
			}
			if code := exitCodeOf(err); code != exitUsage {
				t.Fatalf("parsePid(%q) error %v exits %d, want %d", s, err, code, exitUsage)
			}
			return
		}
		if !ok {
			t.Fatalf("parsePid(%q) = %d, want a refusal", s, pid)
		}
		if pid != want || pid <= 0 || pid > pidfd.MaxPid {
			t.Fatalf("parsePid(%q) = %d, want %d", s, pid, want)
		}
		// Printed, the pid is the argument less its space, sign and
		// leading zeros.
		printed := strconv.Itoa(int(pid))
		if got := strings.TrimLeft(strings.TrimPrefix(strings.TrimSpace(s), "+"), "0"); got != printed {
			t.Fatalf("parsePid(%q) = %d, printed %q; the argument normalised is %q", s, pid, printed, got)
		}
		if back, err := parsePid(printed); err != nil || back != pid {
			t.Fatalf("parsePid(%q) = %d, %v; want %d", printed, back, err, pid)
		}
	})
}

// FuzzParseClaim checks parseClaim (PID TOKEN): the pid is refused first,
// as parsePid refuses it (exit 64); then a token token.Parse refuses is
// refused with exit 65 (exitData); neither gives a pid or a token. An
// accepted claim is parsePid's pid and token.Parse's token, never the
// zero token, and the token's text form is exactly the argument (a token
// has one text form), which parses back to the same token, as MarshalText
// and UnmarshalText do.
func FuzzParseClaim(f *testing.F) {
	for _, c := range [][2]string{
		// main_test.go
		{"1", "not-a-token"},
		{"1", "x"},
		{"1", "v1:t:00000000000000000000000000000000:1:-"},
		{"abc", "v1:t:00000000000000000000000000000000:1:-"},
		{"0", "not-a-token"},
		// token_test.go: good tokens
		{"4242", "v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322"},
		{"4242", "v1:s:69e3b9ae99f04f10ac0563c7561c49fe:1764432384:-"},
		{"4242", "v1:u:69e3b9ae99f04f10ac0563c7561c49fe:1764432384123456:88214"},
		{" 007 ", "v1:u:00000000000000000000000000000000:0:-"},
		// token_test.go: malformed tokens
		{"4242", ""},
		{"4242", "v1:t:::"},
		{"4242", "v1:t:69E3B9AE99F04F10AC0563C7561C49FE:49869:9322"},
		{"4242", "v1:t:69e3b9ae99f04f10ac0563c7561c49fe:049869:9322"},
		{"4242", "v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:0"},
		{"4242", "v1:s:69e3b9ae99f04f10ac0563c7561c49fe:49869:12"},
		{"4242", " v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322"},
		{"4242", "v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322 "},
		{"4242", "v1:t:69e3b9ae-99f0-4f10-ac05-63c7561c49fe:49869:9322"},
		{"4194305", "v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		pid, tok, err := parseClaim([]string{p, s})
		wantPid, pidErr := parsePid(p)
		wantTok, tokErr := token.Parse(s)
		if err != nil {
			if pid != 0 || !tok.IsZero() {
				t.Fatalf("parseClaim(%q, %q) = %d, %v with error %v, want neither", p, s, pid, tok, err)
			}
			code := exitCodeOf(err)
			switch {
			case pidErr != nil:
				if code != exitUsage || err.Error() != pidErr.Error() {
					t.Fatalf("parseClaim(%q, %q) = %v (exit %d); the pid's error is %v (exit %d)", p, s, err, code, pidErr, exitUsage)
				}
			case tokErr != nil:
				if code != exitData {
					t.Fatalf("parseClaim(%q, %q) = %v (exit %d), want exit %d for %v", p, s, err, code, exitData, tokErr)
				}
			default:
				t.Fatalf("parseClaim(%q, %q) = %v, but parsePid and token.Parse accept them", p, s, err)
			}
			return
		}
		if pidErr != nil || tokErr != nil {
			t.Fatalf("parseClaim(%q, %q) = %d, %v; parsePid %v, token.Parse %v", p, s, pid, tok, pidErr, tokErr)
		}
		if pid != wantPid || pid <= 0 {
			t.Fatalf("parseClaim(%q, %q) pid %d, want %d", p, s, pid, wantPid)
		}
		if tok != wantTok || tok.IsZero() {
			t.Fatalf("parseClaim(%q, %q) token %+v, want %+v", p, s, tok, wantTok)
		}
		if tok.String() != s {
			t.Fatalf("parseClaim(%q, %q) token prints as %q", p, s, tok.String())
		}
		if back, err := token.Parse(tok.String()); err != nil || back != tok {
			t.Fatalf("token.Parse(%q) = %+v, %v; want %+v", tok.String(), back, err, tok)
		}
		text, err := tok.MarshalText()
		var back token.Token
		if err != nil || string(text) != s || back.UnmarshalText(text) != nil || back != tok {
			t.Fatalf("token %+v: MarshalText %q, %v; UnmarshalText gives %+v", tok, text, err, back)
		}
	})
}
