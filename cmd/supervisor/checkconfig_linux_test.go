package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigDirs: run --check-config refuses (64) the directories run
// refuses, a log file's or a metrics socket's in a directory others may
// write to (it checked the values only, and said valid), and passes a good
// configuration without making the state or socket directory run would
// make. Each refusal is compared with what run itself exits with.
func TestCheckConfigDirs(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	state, sock := filepath.Join(base, "lib", "state"), filepath.Join(base, "run", "api.sock")
	tests := []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"good", nil, 0, "configuration is valid"},
		{"log file in a 1777 dir", []string{"--log-output", "file:" + filepath.Join(open, "feed.log")}, exitUsage, "unsafe log directory"},
		{"metrics socket in a 1777 dir", []string{"--metrics-listen", "unix:" + filepath.Join(open, "m.sock")}, exitUsage, "unsafe metrics socket directory"},
		{"socket in a 1777 dir", []string{"--socket", filepath.Join(open, "api.sock")}, exitUsage, "unsafe socket directory"},
		{"state dir 1777", []string{"--state-dir", open}, exitUsage, "unsafe state directory"},
	}
	for _, tt := range tests {
		args := append([]string{"run", "--check-config", "--state-dir", state, "--socket", sock, "--log-output", "stdout"}, tt.args...)
		code, out, errs := cli(t, args...)
		if code != tt.code || !strings.Contains(out+errs, tt.say) {
			t.Errorf("%s: run --check-config %q = %d, %q %q; want %d saying %q", tt.name, tt.args, code, out, errs, tt.code, tt.say)
		}
	}
	for _, d := range []string{filepath.Dir(state), filepath.Dir(sock)} {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("run --check-config made %s (%v)", d, err)
		}
	}
	// run itself, on a state directory of its own (it makes it before
	// the other checks), refuses each as --check-config did.
	bin := binary(t)
	for i, tt := range tests {
		if tt.code == 0 {
			continue
		}
		st := filepath.Join(base, "runstate", string(rune('a'+i)))
		args := append([]string{"run", "--state-dir", st, "--socket", sock, "--log-output", "stdout"}, tt.args...)
		cmd := exec.Command(bin, args...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tt.code || !strings.Contains(string(out), tt.say) {
			t.Errorf("%s: run %q = %v, %q; want exit %d saying %q", tt.name, tt.args, err, out, tt.code, tt.say)
		}
	}
}
