package procfs

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestReadCmdline reads this test's own command line, and that of a
// process whose command line passes MaxCmdline: bounded, and said to be
// cut exactly when it was.
func TestReadCmdline(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		// testenv.Skip would import this package: Linux always has /proc.
		if runtime.GOOS == "linux" {
			t.Fatalf("no /proc on Linux: %v", err)
		}
		t.Skip("no /proc here")
	}
	long := strings.Repeat("x", MaxCmdline)
	// A shell that waits, whatever arguments follow its script.
	const script = "sleep 100; :"
	head := "sh\x00-c\x00" + script + "\x00"
	for _, tt := range []struct {
		name string
		argv []string
	}{
		{"short", []string{"sh", "-c", script}},
		{"just whole", []string{"sh", "-c", script, long[:MaxCmdline-len(head)-1]}},
		{"one byte over", []string{"sh", "-c", script, long[:MaxCmdline-len(head)]}},
		{"long", []string{"sh", "-c", script, long, "--key=secret"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh")
			cmd.Args = tt.argv
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			raw := strings.Join(tt.argv, "\x00") + "\x00"
			var got []string
			var cut bool
			// Until the child has exec'd (its cmdline is the test's before).
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				var err error
				if got, cut, err = ReadCmdline("/proc", int32(cmd.Process.Pid)); err != nil {
					t.Fatal(err)
				}
				if len(got) > 2 && got[2] == script {
					break
				}
				time.Sleep(time.Millisecond)
			}
			want := ParseCmdline([]byte(raw[:min(len(raw), MaxCmdline)]))
			if !slices.Equal(got, want) || cut != (len(raw) > MaxCmdline) {
				t.Errorf("ReadCmdline = %d args (cut %v), want %d (cut %v)", len(got), cut, len(want), len(raw) > MaxCmdline)
			}
		})
	}
	if _, _, err := ReadCmdline("/proc", 0x7ffffff0); !os.IsNotExist(err) {
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
