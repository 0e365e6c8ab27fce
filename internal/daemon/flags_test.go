package daemon

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFlagsNameEveryKey checks that every key of the config file has the
// flag of the same name, so that the two never drift apart.
func TestFlagsNameEveryKey(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfg.Flags(fs)
	n := 0
	rt := reflect.TypeFor[Config]()
	for i := range rt.NumField() {
		key, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		n++
		if fs.Lookup(strings.ReplaceAll(key, "_", "-")) == nil {
			t.Errorf("config key %s has no flag --%s", key, strings.ReplaceAll(key, "_", "-"))
		}
	}
	count := 0
	fs.VisitAll(func(*flag.Flag) { count++ })
	if count != n {
		t.Errorf("Flags defines %d flags, want one for each of the %d config keys", count, n)
	}
}

func TestLoadFileUnderFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"grace":"10s","reap_interval":"1m","mechanism":"netlink"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.Flags(fs)
	// --grace at its default still wins: it was given.
	if err := fs.Parse([]string{"--grace", "5s", "--max-final", "7"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.LoadFileUnderFlags(path, fs); err != nil {
		t.Fatalf("LoadFileUnderFlags(%s) = %v", path, err)
	}
	if got, want := time.Duration(cfg.Grace), 5*time.Second; got != want {
		t.Errorf("grace = %v, want %v (the flag over the file)", got, want)
	}
	if got, want := time.Duration(cfg.ReapInterval), time.Minute; got != want {
		t.Errorf("reap_interval = %v, want %v (the file over the default)", got, want)
	}
	if cfg.Mechanism != "netlink" || cfg.MaxFinal != 7 || cfg.StateDir != DefaultStateDir() {
		t.Errorf("config = %+v, want mechanism netlink from the file, max_final 7 from the flag, the default state dir", cfg)
	}
	if err := cfg.LoadFileUnderFlags(filepath.Join(t.TempDir(), "none.json"), fs); err == nil {
		t.Error("LoadFileUnderFlags(a missing file) = nil, want an error")
	}
}

// TestRedactArgsFlag: --redact-args adds a pattern per use, and the
// command line's list replaces the file's whole.
func TestRedactArgsFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"redact_args":["from-file=*"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"from-file=*"}},
		{[]string{"--redact-args", "--password=*", "--redact-args", "-p *"}, []string{"--password=*", "-p *"}},
		{[]string{"--redact-args", `["a","b c"]`}, []string{"a", "b c"}},
		{[]string{"--redact-args", ""}, nil},
	} {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.Flags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.LoadFileUnderFlags(path, fs); err != nil {
			t.Fatalf("LoadFileUnderFlags(%q) = %v", tt.args, err)
		}
		if !reflect.DeepEqual(cfg.RedactArgs, tt.want) {
			t.Errorf("%q: redact_args = %q, want %q", tt.args, cfg.RedactArgs, tt.want)
		}
	}
}
