package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"keys", `{"state_dir":"/x","grace":"2s","mechanism":"netlink"}`, true},
		{"unknown key", `{"state_dirr":"/x"}`, false},
		{"bad duration", `{"grace":"soon"}`, false},
		{"trailing", `{} {}`, false},
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

func TestValidate(t *testing.T) {
	base := DefaultConfig()
	base.StateDir, base.Socket = "/s", "/s.sock"
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"relative state": func(c *Config) { c.StateDir = "s" },
		"negative grace": func(c *Config) { c.Grace = -1 },
		"tiny interval":  func(c *Config) { c.ReapInterval = 1 },
		"bad cgroup":     func(c *Config) { c.Cgroup = "sometimes" },
		"long socket":    func(c *Config) { c.Socket = "/" + string(make([]byte, 200)) },
	} {
		c := base
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", name, err)
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
