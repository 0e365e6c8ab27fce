package daemon

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

func TestConfigLoadFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"keys", `{"state_dir":"/x","grace":"2s","mechanism":"netlink"}`, true},
		{"unknown key", `{"state_dirr":"/x"}`, false},
		{"bad duration", `{"grace":"soon"}`, false},
		{"trailing", `{} {}`, false},
		{"stray bracket", `{"grace":"2s"} ]`, false},
		{"negative duration", `{"grace":"-1s"}`, false},
		{"over 1 MiB", `{"state_dir":"/` + strings.Repeat("x", 1<<20) + `"}`, false},
		{"a key twice", `{"grace":"5s","grace":"1s"}`, false},
		{"a key twice, in other case", `{"grace":"5s","Grace":"1s"}`, false},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		os.WriteFile(p, []byte(tt.body), 0o600)
		cfg := DefaultConfig()
		err := LoadFile(p, &cfg)
		if (err == nil) != tt.ok {
			t.Errorf("%s: LoadFile = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: LoadFile = %v, want ErrConfig", tt.name, err)
		}
		if tt.name == "keys" && (cfg.StateDir != "/x" || time.Duration(cfg.Grace) != 2*time.Second || cfg.Socket != DefaultSocket()) {
			t.Errorf("LoadFile merged %+v", cfg)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := DefaultConfig()
	base.StateDir, base.Socket = "/s", "/s.sock"
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}

	for name, mut := range map[string]func(*Config){
		"relative state":    func(c *Config) { c.StateDir = "s" },
		"negative grace":    func(c *Config) { c.Grace = -1 },
		"tiny interval":     func(c *Config) { c.ReapInterval = 1 },
		"bad cgroup":        func(c *Config) { c.Cgroup = "sometimes" },
		"long socket":       func(c *Config) { c.Socket = "/" + string(make([]byte, 200)) },
		"grace over max":    func(c *Config) { c.Grace = api.Duration(api.MaxGrace + time.Nanosecond) },
		"grace 2h":          func(c *Config) { c.Grace = api.Duration(2 * time.Hour) },
		"argv_max < 0":      func(c *Config) { c.ArgvMax = -1 },
		"argv_max big":      func(c *Config) { c.ArgvMax = 1<<20 + 1 },
		"redact_args":       func(c *Config) { c.RedactArgs = []string{"--password=*", "a b c"} },
		"sandboxed_callers": func(c *Config) { c.SandboxedCallers = "sometimes" },
	} {
		c := base
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", name, err)
		}
	}
}

// TestConfigFileOwner: a config file another user may write to, or owns,
// is refused: it sets what the daemon runs with as root.
func TestConfigFileOwner(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		uid  int
		ok   bool
	}{
		{"own, 0600", 0o600, -1, true},
		{"own, 0644", 0o644, -1, true},
		{"own, group-writable", 0o664, -1, false},
		{"own, world-writable", 0o666, -1, false},
		{"another user's, 0644", 0o644, 65534, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(p, []byte(`{"grace":"2s"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.uid >= 0 {
				testenv.RequireRoot(t)
				if err := os.Chown(p, tc.uid, tc.uid); err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfig()
			err := LoadFile(p, &cfg)
			if tc.ok && err != nil {
				t.Errorf("LoadFile = %v, want it read", err)
			}
			if !tc.ok && (!errors.Is(err, ErrConfig) || time.Duration(cfg.Grace) == 2*time.Second) {
				t.Errorf("LoadFile = %v (grace %v), want ErrConfig and nothing taken from it", err, cfg.Grace)
			}
		})
	}
}

// TestConfigCheckHost: a socket group that is neither a group id nor in
// this host's group database is refused by CheckHost (--check-config said
// valid, and the start failed as an internal error); Validate, which a
// configuration passes wherever it is read, does not look.
func TestConfigCheckHost(t *testing.T) {
	for _, tc := range []struct {
		group string
		ok    bool
	}{{"", true}, {"0", true}, {"root", true}, {"65534", true}, {"nosuchgroup-xyz", false}, {"-1", false}, {"4294967295", false}} {
		c := DefaultConfig()
		c.StateDir, c.Socket, c.SocketGroup = "/s", "/s.sock", tc.group
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(socket_group %q) = %v", tc.group, err)
		}
		if err := c.CheckHost(); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("CheckHost(socket_group %q) = %v, want ok %v (else ErrConfig)", tc.group, err, tc.ok)
		}
	}
}

// TestConfigGraceLimit: the config takes exactly the grace the API takes.
func TestConfigGraceLimit(t *testing.T) {
	c := DefaultConfig()
	c.StateDir, c.Socket = "/s", "/s.sock"
	c.Grace = api.Duration(api.MaxGrace)
	if err := c.Validate(); err != nil {
		t.Errorf("grace %v (api.MaxGrace): Validate() = %v, want nil", c.Grace, err)
	}
}

// TestConfigDurationText: durations read and write as Go duration text.
func TestConfigDurationText(t *testing.T) {
	cfg := DefaultConfig()
	if err := decodeConfig([]byte(`{"grace":"10s","retain_owed":"48h"}`), &cfg); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"grace":"10s"`, `"retain_owed":"48h0m0s"`, `"reap_interval":"30s"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config encodes as %s, want %s in it", b, want)
		}
	}
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(`{"state_dir":"/var/lib/x","grace":"10s","mechanism":"ebpf"}`))
	f.Add([]byte(`{"metrics_listen":"unix:/run/m.sock","graph_max_exited":-1}`))
	f.Add([]byte(`{"grace":"-1s"} trailing`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := DefaultConfig()
		if err := decodeConfig(b, &cfg); err != nil {
			return
		}
		// Whatever decodes is either valid or refused with ErrConfig.
		if err := cfg.Validate(); err != nil && !errors.Is(err, ErrConfig) {
			t.Fatalf("Validate() = %v, want nil or ErrConfig", err)
		}
	})
}

func TestFindSocket(t *testing.T) {
	t.Setenv(SocketEnv, "")
	if got := FindSocket(""); got != DefaultSocket() {
		t.Errorf("FindSocket(\"\") = %q, want the default %q", got, DefaultSocket())
	}
	if os.Geteuid() == 0 && DefaultSocket() != RootSocket {
		t.Errorf("root's DefaultSocket() = %q, want RootSocket %q", DefaultSocket(), RootSocket)
	}
	t.Setenv(SocketEnv, "/from/env.sock")
	if got := FindSocket(""); got != "/from/env.sock" {
		t.Errorf("FindSocket(\"\") with $%s set = %q, want /from/env.sock", SocketEnv, got)
	}
	if got := FindSocket("/flag.sock"); got != "/flag.sock" {
		t.Errorf("FindSocket(/flag.sock) = %q, want /flag.sock", got)
	}
}

// TestSocketHint: nothing to add when the socket exists; otherwise the
// missing path is named, and an older socket found is named but not used.
func TestSocketHint(t *testing.T) {
	dir := t.TempDir()
	present, absent, file := filepath.Join(dir, "present.sock"), filepath.Join(dir, "absent.sock"), filepath.Join(dir, "file")
	l, err := net.Listen("unix", present)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := func(paths ...string) []otherSocket {
		var l []otherSocket
		for _, p := range paths {
			l = append(l, otherSocket{p, "an old one"})
		}
		return l
	}
	tests := []struct {
		name, sock   string
		others       []otherSocket
		want, absent []string
	}{
		{"the socket exists", present, old(present), nil, []string{"no socket"}},
		{"nothing anywhere", absent, old(filepath.Join(dir, "old.sock")), []string{"no socket at " + absent}, []string{"old.sock"}},
		{"an older socket", absent, old(present), []string{"no socket at " + absent, present + " exists (an old one)", "--socket " + present}, nil},
		{"an older path that is no socket", absent, old(file), []string{"no socket at " + absent}, []string{file + " exists"}},
	}
	for _, tt := range tests {
		got := socketHint(tt.sock, tt.others)
		if len(tt.want) == 0 && got != "" {
			t.Errorf("%s: socketHint = %q, want nothing", tt.name, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: socketHint = %q, want it to say %q", tt.name, got, w)
			}
		}
		for _, w := range tt.absent {
			if strings.Contains(got, w) {
				t.Errorf("%s: socketHint = %q, want no %q", tt.name, got, w)
			}
		}
	}
}

// TestExplainUnreachable: the hint goes on its own line and the error
// stays what it was for errors.Is.
func TestExplainUnreachable(t *testing.T) {
	base := errors.New("dial: no such file")
	dir := t.TempDir()
	missing := filepath.Join(dir, "api.sock")
	got := ExplainUnreachable(base, missing)
	if !errors.Is(got, base) || !strings.Contains(got.Error(), "\nno socket at "+missing) {
		t.Errorf("ExplainUnreachable(missing) = %q, want %q then the hint on its own line", got, base)
	}
	if got := ExplainUnreachable(base, dir); got != base {
		t.Errorf("ExplainUnreachable(existing path) = %q, want the error unchanged", got)
	}
}

// FuzzPatternList: whatever --redact-args is given, what it holds is what
// String gives back: LoadFileUnderFlags sets the flag again from String,
// so a list that did not survive the round trip would change the patterns.
func FuzzPatternList(f *testing.F) {
	f.Add("--password=*", "")
	f.Add(`["a","b*"]`, "c")
	f.Add(`["unterminated`, "")
	f.Add("", `[]`)
	f.Fuzz(func(t *testing.T, first, second string) {
		var p PatternList
		for _, s := range []string{first, second} {
			if err := p.Set(s); err != nil {
				return
			}
		}
		var back PatternList
		if err := back.Set(p.String()); err != nil {
			t.Fatalf("Set(String() = %q) = %v", p.String(), err)
		}
		if !slices.Equal(back, p) {
			t.Fatalf("patterns %q came back from %q as %q", []string(p), p.String(), []string(back))
		}
	})
}
