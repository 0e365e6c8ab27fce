package daemon

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/logfeed"
)

// TestLogProcessEventsConfig: log_process_events through the real config
// load, the file's boolean or list under the flag's bare, boolean or list
// form, and the errors of each, which name the value and refuse the whole
// configuration.
func TestLogProcessEventsConfig(t *testing.T) {
	for _, tt := range []struct {
		name    string
		file    string // the key's JSON value in the file; "" leaves the key out
		args    []string
		want    logfeed.Kinds
		wantErr string // a part of the error; "" for none
	}{
		{"default", "", nil, 0, ""},
		{"file true", `true`, nil, logfeed.AllKinds, ""},
		{"file false", `false`, nil, 0, ""},
		{"file list", `"exec,exit"`, nil, logfeed.Execs | logfeed.Exits, ""},
		{"file one", `"exec"`, nil, logfeed.Execs, ""},
		{"bare flag", "", []string{"--log-process-events"}, logfeed.AllKinds, ""},
		{"bare flag over file list", `"exec"`, []string{"--log-process-events"}, logfeed.AllKinds, ""},
		{"flag exit over file true", `true`, []string{"--log-process-events=exit"}, logfeed.Exits, ""},
		{"flag false over file list", `"exec"`, []string{"--log-process-events=false"}, 0, ""},
		{"flag list over file false", `false`, []string{"--log-process-events=fork,exit"}, logfeed.Forks | logfeed.Exits, ""},
		{"flag true", "", []string{"--log-process-events=true"}, logfeed.AllKinds, ""},
		{"file unknown kind", `"exec,spawn"`, nil, 0, `unknown kind "spawn"`},
		{"file empty list", `""`, nil, 0, `"": an empty kind`},
		{"file repeated kind", `"exit,exit"`, nil, 0, `"exit,exit": exit given twice`},
		{"file number", `1`, nil, 0, "want true, false or a string"},
		{"file null", `null`, nil, 0, "want true, false or a string"},
		{"bad file under a good flag", `"execs"`, []string{"--log-process-events=exec"}, 0, `unknown kind "execs"`},
		{"flag unknown kind", `true`, []string{"--log-process-events=exec,lost"}, 0, `unknown kind "lost"`},
		{"flag empty list", `true`, []string{"--log-process-events="}, 0, "an empty kind"},
		{"flag repeated kind", "", []string{"--log-process-events=exec,exec"}, 0, "exec given twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"mechanism":"netlink"}`
			if tt.file != "" {
				body = `{"mechanism":"netlink","log_process_events":` + tt.file + `}`
			}
			path := filepath.Join(t.TempDir(), "c.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg.Flags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = cfg.LoadFileUnderFlags(path, fs)
			}
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("loading %s under %q = %v", body, tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("loading %s under %q = %v, want an error with %q", body, tt.args, err, tt.wantErr)
			case tt.wantErr != "":
				return
			}
			if cfg.LogProcessEvents != tt.want {
				t.Errorf("loading %s under %q: log_process_events = %v, want %v", body, tt.args, cfg.LogProcessEvents, tt.want)
			}
			if cfg.Mechanism != "netlink" {
				t.Errorf("mechanism = %q, want netlink from the file", cfg.Mechanism)
			}
		})
	}
}

// TestLogProcessEventsFileError: a bad kind in the file is a config error
// (ErrConfig) that names the value, and Validate refuses a set with a bit
// that is no kind.
func TestLogProcessEventsFileError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"mechanism":"netlink","log_process_events":"exec,exec"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	err := LoadFile(path, &cfg)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"exec,exec"`) {
		t.Errorf("LoadFile = %v, want ErrConfig naming \"exec,exec\"", err)
	}
	cfg.LogProcessEvents = logfeed.AllKinds | 1
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("Validate(log_process_events with an unknown bit) = %v, want ErrConfig", err)
	}
}
