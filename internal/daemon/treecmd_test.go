package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/token"
)

// TestTreeCmdline: the daemon's tree reads nothing on the client; a local
// tree is redacted by the installed config's patterns, unredacted without
// a config, and shows nothing when the config cannot be used.
func TestTreeCmdline(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withRules := write("rules.conf", `{"redact_args":["--password=*","-p *","AKIA????????????????"]}`, 0o644)
	noRules := write("plain.conf", `{"grace":"1s"}`, 0o644)
	broken := write("broken.conf", `{"redact_args":`, 0o644)
	badPattern := write("bad.conf", `{"redact_args":["a b c"]}`, 0o644)
	argv := func(pid int32, _ token.Token) ([]string, bool) {
		if pid == 2 { // a vector /proc gave cut inside a secret
			return []string{"db", "-v", "AKIAQWERTY"}, true
		}
		return []string{"db", "--password=hunter2", "-p", "hunter2", "-v"}, false
	}
	tests := []struct {
		mech, config string
		want         string
		none         bool
	}{
		{"daemon", withRules, "", true},
		{"local:ebpf", withRules, "db --password=[REDACTED] -p [REDACTED] -v", false},
		{"local:proc", noRules, "db --password=hunter2 -p hunter2 -v", false},
		{"local:proc", filepath.Join(dir, "absent.conf"), "db --password=hunter2 -p hunter2 -v", false},
		{"local:proc", broken, "", true},
		{"local:proc", badPattern, "", true},
		{"local:proc", dir, "", true}, // a directory: cannot be read as a config
	}
	for _, tt := range tests {
		f := treeCmdline(tt.mech, tt.config, argv)
		if (f == nil) != tt.none {
			t.Errorf("treeCmdline(%q, %s) = %v, want none %v", tt.mech, tt.config, f != nil, tt.none)
			continue
		}
		if f != nil {
			if got := f(1, token.Token{}); got != tt.want {
				t.Errorf("treeCmdline(%q, %s)(1) = %q, want %q", tt.mech, tt.config, got, tt.want)
			}
			if got := f(2, token.Token{}); tt.config == withRules && got != "db -v [REDACTED]" {
				t.Errorf("treeCmdline(%q, %s)(2), a cut vector, = %q, want its last argument redacted", tt.mech, tt.config, got)
			}
		}
	}
}

// TestConfigRedaction: the patterns of a config file for a local events
// watcher; none without the file, an error when it cannot be used.
func TestConfigRedaction(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		config  string
		want    string // the argv below, redacted
		wantErr bool
	}{
		{write("rules.conf", `{"redact_args":["--password=*"]}`), "db --password=[REDACTED]", false},
		{write("plain.conf", `{"grace":"1s"}`), "db --password=hunter2", false},
		{filepath.Join(dir, "absent.conf"), "db --password=hunter2", false},
		{write("broken.conf", `{"redact_args":`), "", true},
		{write("bad.conf", `{"redact_args":["a b c"]}`), "", true},
		{dir, "", true},
	}
	for _, tt := range tests {
		rules, err := configRedaction(tt.config)
		if (err != nil) != tt.wantErr {
			t.Errorf("configRedaction(%s) error %v, want error %v", tt.config, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		a, _ := rules.Argv([]string{"db", "--password=hunter2"})
		if got := strings.Join(a, " "); got != tt.want {
			t.Errorf("configRedaction(%s) redacts to %q, want %q", tt.config, got, tt.want)
		}
	}
}
