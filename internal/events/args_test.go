package events

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitArgString(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\x00", []string{""}},
		{"a\x00", []string{"a"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"a\x00cut", []string{"a", "cut"}},
		{"ü\x00-x=1\x00", []string{"ü", "-x=1"}},
	}
	for _, tt := range tests {
		if got := SplitArgString(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("SplitArgString(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := SplitArgs([]byte(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzSplitArgString checks that the arguments are substrings of the area
// that join back into it, and that SplitArgs agrees.
func FuzzSplitArgString(f *testing.F) {
	for _, s := range []string{"", "\x00", "a\x00b\x00", "a\x00\x00", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := SplitArgString(s)
		if want := SplitArgs([]byte(s)); !slices.Equal(got, want) {
			t.Fatalf("SplitArgString(%q) = %q, SplitArgs = %q", s, got, want)
		}
		if s == "" {
			if got != nil {
				t.Fatalf("SplitArgString(\"\") = %q, want nil", got)
			}
			return
		}
		if j := strings.Join(got, "\x00"); j != strings.TrimSuffix(s, "\x00") {
			t.Fatalf("SplitArgString(%q) joins to %q", s, j)
		}
	})
}
