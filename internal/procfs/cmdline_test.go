package procfs

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseCmdline(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\x00\x00", nil},
		{"sleep\x00600\x00", []string{"sleep", "600"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"nginx: worker process\x00\x00\x00\x00", []string{"nginx: worker process"}},
		{"no-nul", []string{"no-nul"}},
	} {
		if got := ParseCmdline([]byte(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("ParseCmdline(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestReadCmdline reads this test's own command line, bounded.
func TestReadCmdline(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc here")
	}
	got, err := ReadCmdline("/proc", int32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.Join(os.Args, "\x00") + "\x00"
	if want := ParseCmdline([]byte(raw[:min(len(raw), MaxCmdline)])); !slices.Equal(got, want) {
		t.Errorf("ReadCmdline(self) = %q, want %q", got, want)
	}
	if _, err := ReadCmdline("/proc", 0x7ffffff0); !os.IsNotExist(err) {
		t.Errorf("ReadCmdline(no such pid) error = %v, want not exist", err)
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte("sleep\x00600\x00"))
	f.Add([]byte("title without nul"))
	f.Add([]byte("\x00a\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		argv := ParseCmdline(b)
		if got, want := strings.Join(argv, "\x00"), string(bytes.TrimRight(b, "\x00")); got != want {
			t.Fatalf("ParseCmdline(%q) = %q, which joins to %q", b, argv, got)
		}
		if len(argv) > 0 && argv[len(argv)-1] == "" {
			t.Fatalf("ParseCmdline(%q) = %q ends with an empty argument", b, argv)
		}
	})
}
