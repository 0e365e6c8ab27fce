package token

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

var bootA = procfs.BootID{0x69, 0xe3, 0xb9, 0xae, 0x99, 0xf0, 0x4f, 0x10, 0xac, 0x05, 0x63, 0xc7, 0x56, 0x1c, 0x49, 0xfe}
var bootB = procfs.BootID{1, 2, 3}

func TestRoundTrip(t *testing.T) {
	for _, tok := range []Token{
		{Boot: bootA, Start: 49869, Ino: 9322, Prec: Ticks},
		{Boot: bootA, Start: 49869, Prec: Ticks},
		{Boot: bootB, Start: 0, Prec: Ticks},
		{Boot: bootA, Start: 1764432384123456, Prec: Micro},
		{Boot: bootA, Start: 1764432384123456, Prec: Micro, Uniq: 88214},
		{Boot: bootA, Start: 1764432384, Prec: Second},
	} {
		s := tok.String()
		got, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q) = %v", s, err)
		}
		if got != tok {
			t.Errorf("Parse(%q) = %+v, want %+v", s, got, tok)
		}
		if !strings.HasPrefix(s, "v1:") {
			t.Errorf("%q lacks the version prefix", s)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	good := "v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322"
	for _, s := range []string{
		"",
		"garbage",
		"v2:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322",
		"v1:x:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322",
		"v1:t:69E3B9AE99F04F10AC0563C7561C49FE:49869:9322",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49f:49869:9322",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49zz:49869:9322",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49fe:-5:9322",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49fe:049869:9322",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49fe::9322",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:0",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:",
		"v1:s:69e3b9ae99f04f10ac0563c7561c49fe:49869:12",
		"v1:u:69e3b9ae99f04f10ac0563c7561c49fe:1764432384123456:0",
		"v1:u:69e3b9ae99f04f10ac0563c7561c49fe:1764432384123456:012",
		"v1:u:69e3b9ae99f04f10ac0563c7561c49fe:1764432384123456:x",
		"v1:t:69e3b9ae99f04f10ac0563c7561c49fe:99999999999999999999999:-",
		good + ":extra",
		" " + good,
		strings.Repeat("v", 200),
	} {
		if _, err := Parse(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", s, err)
		}
	}
}

func TestCompare(t *testing.T) {
	full := Token{Boot: bootA, Start: 100, Ino: 7, Prec: Ticks}
	tests := []struct {
		name            string
		claim, observed Token
		want            Match
	}{
		{"same instance", full, full, Same},
		{"later start", full, Token{Boot: bootA, Start: 101, Ino: 8, Prec: Ticks}, Different},
		{"same tick other inode", full, Token{Boot: bootA, Start: 100, Ino: 8, Prec: Ticks}, Different},
		{"ticks-only claim", Token{Boot: bootA, Start: 100, Prec: Ticks}, full, Unproven},
		{"ticks-only observation", full, Token{Boot: bootA, Start: 100, Prec: Ticks}, Unproven},
		{"ticks-only claim, other start", Token{Boot: bootA, Start: 99, Prec: Ticks}, full, Different},
		{"other boot", Token{Boot: bootB, Start: 100, Ino: 7, Prec: Ticks}, full, OtherBoot},
		{"precision mismatch", Token{Boot: bootA, Start: 100, Prec: Second}, full, Unproven},
		{"same second", Token{Boot: bootA, Start: 100, Prec: Second}, Token{Boot: bootA, Start: 100, Prec: Second}, Unproven},
		{"other second", Token{Boot: bootA, Start: 100, Prec: Second}, Token{Boot: bootA, Start: 102, Prec: Second}, Different},
		{"same microsecond", Token{Boot: bootA, Start: 100, Prec: Micro}, Token{Boot: bootA, Start: 100, Prec: Micro}, Same},
		{"same microsecond, same uniqueid", Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 5}, Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 5}, Same},
		{"same microsecond, other uniqueid", Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 5}, Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 6}, Different},
		{"uniqueid on the claim only", Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 5}, Token{Boot: bootA, Start: 100, Prec: Micro}, Same},
		{"uniqueid on the observation only", Token{Boot: bootA, Start: 100, Prec: Micro}, Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 5}, Same},
		{"other microsecond, same uniqueid", Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 5}, Token{Boot: bootA, Start: 101, Prec: Micro, Uniq: 5}, Different},
		{"uniqueid never matches an inode", Token{Boot: bootA, Start: 100, Prec: Micro, Uniq: 7}, full, Unproven},
		{"zero claim", Token{}, full, Unproven},
	}
	for _, tt := range tests {
		got, why := Compare(tt.claim, tt.observed)
		if got != tt.want {
			t.Errorf("%s: Compare(%v, %v) = %v (%s), want %v", tt.name, tt.claim, tt.observed, got, why, tt.want)
		}
		if why == "" {
			t.Errorf("%s: Compare gave no reason", tt.name)
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	tok := Token{Boot: bootA, Start: 49869, Ino: 9322, Prec: Ticks}
	buf := make([]byte, 0, 80)
	b.ReportAllocs()
	for b.Loop() {
		buf = tok.Append(buf[:0])
	}
}

func FuzzParse(f *testing.F) {
	f.Add("v1:t:69e3b9ae99f04f10ac0563c7561c49fe:49869:9322")
	f.Add("v1:s:69e3b9ae99f04f10ac0563c7561c49fe:1764432384:-")
	f.Add("v1:u:69e3b9ae99f04f10ac0563c7561c49fe:1764432384123456:88214")
	f.Add("v1:t:::")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrMalformed", s, err)
			}
			return
		}
		// Every valid token has exactly one text form.
		if got := tok.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q", s, got)
		}
	})
}

func TestZeroTokenText(t *testing.T) {
	b, err := json.Marshal(struct {
		T Token `json:"t"`
	}{})
	if err != nil || string(b) != `{"t":""}` {
		t.Fatalf("json.Marshal(zero Token) = %s, %v, want {\"t\":\"\"}", b, err)
	}
	var back struct {
		T Token `json:"t"`
	}
	if err := json.Unmarshal(b, &back); err != nil || !back.T.IsZero() {
		t.Errorf("json.Unmarshal(%s) = %+v, %v, want the zero Token", b, back.T, err)
	}
	if (Token{}).String() != "" {
		t.Errorf("zero Token String() = %q, want empty", Token{}.String())
	}
}

// TestAppendBoots writes tokens of several boots and precisions in turn:
// the hex kept for the last boot written must never stand for another's.
func TestAppendBoots(t *testing.T) {
	boots := []procfs.BootID{bootA, {}, {0xff, 0x01, 0x80}, bootA}
	for round := 0; round < 2; round++ {
		for i, boot := range boots {
			for _, tc := range []struct {
				tok  Token
				want string
			}{
				{Token{Boot: boot, Start: uint64(100 + i), Ino: uint64(7 + i), Prec: Ticks}, fmt.Sprintf("v1:t:%x:%d:%d", boot[:], 100+i, 7+i)},
				{Token{Boot: boot, Start: 1700000000123456, Uniq: 77, Ino: 9, Prec: Micro}, fmt.Sprintf("v1:u:%x:1700000000123456:77", boot[:])},
				{Token{Boot: boot, Start: 1700000000, Prec: Second}, fmt.Sprintf("v1:s:%x:1700000000:-", boot[:])},
			} {
				if got := string(tc.tok.Append(nil)); got != tc.want {
					t.Errorf("boot %d: Append = %q, want %q", i, got, tc.want)
				}
			}
		}
	}
}
