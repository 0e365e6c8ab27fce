package daemon

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

// Flags binds c's fields to fs, one flag a config key, named as the key
// with dashes for underscores (state_dir is --state-dir), with c's values
// as the defaults.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "state directory (store, job output); by default "+RootStateDir+" for root, $XDG_STATE_HOME/supervisor for a user")
	fs.StringVar(&c.Socket, "socket", c.Socket, "API socket path; by default "+RootSocket+" for root, $XDG_RUNTIME_DIR/supervisor.sock for a user")
	fs.StringVar(&c.SocketGroup, "socket-group", c.SocketGroup, "group (name or id) of the socket (mode 0660)")
	fs.StringVar(&c.Mechanism, "mechanism", c.Mechanism, "event mechanism: "+strings.Join(tracker.Mechanisms, "|"))
	fs.StringVar(&c.LogOutput, "log-output", c.LogOutput, "log feed output: stdout, file:PATH, syslog[:ADDR]")
	fs.StringVar(&c.LogSchema, "log-schema", c.LogSchema, "log feed schema: ecs|ocsf")
	fs.Var(&c.LogProcessEvents, "log-process-events", "log a line per process event: bare (or =true) for fork, exec and exit, =false for none, or =KINDS, a list from fork,exec,exit such as =exec")
	fs.Int64Var(&c.LogUserBytes, "log-user-bytes", c.LogUserBytes, "process-line bytes a second one user's processes (root's excepted) may put in the log feed with their arguments; past it their lines keep the first KiB of each command line, marked args_withheld (negative: no bound)")
	fs.IntVar(&c.ArgvMax, "argv-max", c.ArgvMax, "argument bytes an eBPF exec event carries (0 to 1048576; longer argv is cut and flagged)")
	fs.Var((*PatternList)(&c.RedactArgs), "redact-args", "argument redaction `pattern` (repeat for more): NAME=VALUE, 'FLAG NEXT' or GLOB; see supervisor.conf.md")
	fs.Var(&c.Grace, "grace", fmt.Sprintf("default teardown grace period, a `duration` of at most %v", api.MaxGrace))
	fs.Var(&c.ReapInterval, "reap-interval", "how often the reaper runs on its own (a `duration`)")
	fs.Var(&c.RetainFinal, "retain-final", "how long finished claims are kept (a `duration`)")
	fs.Var(&c.RetainOwed, "retain-owed", "how long a job's result waits for its caller (a `duration`)")
	fs.IntVar(&c.MaxFinal, "max-final", c.MaxFinal, "finished claims kept at most")
	fs.StringVar(&c.Cgroup, "cgroup", c.Cgroup, "grant cgroups: auto, off, or a cgroup v2 directory")
	fs.IntVar(&c.GraphMaxExited, "graph-max-exited", c.GraphMaxExited, "exited processes the lineage graph keeps once no live process needs them")
	fs.Var(&c.GraphMaxExitedAge, "graph-max-exited-age", "how long the lineage graph keeps such exited processes (a `duration`)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "serve Prometheus metrics on host:port or unix:/path (default off)")
	fs.IntVar(&c.QuotaClaims, "quota-claims", c.QuotaClaims, "live claims each uid but root may hold (0: no limit)")
	fs.Int64Var(&c.QuotaBytes, "quota-bytes", c.QuotaBytes, "bytes each uid's claims may store (0: no limit)")
	fs.Int64Var(&c.JobOutputMax, "job-output-max", c.JobOutputMax, "bytes of a job's output kept on disk; the oldest go past it (0: no bound)")
	fs.IntVar(&c.ConnsPerUID, "conns-per-uid", c.ConnsPerUID, "API connections each uid but root has served at once")
	fs.Float64Var(&c.RatePerUID, "rate-per-uid", c.RatePerUID, "API requests a second each uid but root may make")
	fs.IntVar(&c.BurstPerUID, "burst-per-uid", c.BurstPerUID, "API requests each uid but root may make at once")
	fs.IntVar(&c.LongPerUID, "long-per-uid", c.LongPerUID, "long-lived API requests (release, kill) each uid but root may have in flight")
	fs.IntVar(&c.QuotaFailed, "quota-failed", c.QuotaFailed, "failed launches kept per uid; older ones are deleted (0: none kept)")
	fs.StringVar(&c.SandboxedCallers, "sandboxed-callers", c.SandboxedCallers, "serve or refuse callers but root with a thread under no_new_privs or a user namespace of their own, which may be confined (Landlock) in ways jobs and signals do not carry")
}

// LoadFileUnderFlags loads the config file at path over the defaults, then
// sets again the flags given on fs's command line, which win over the file.
// fs has been parsed, and its flags bound to c (Flags): they were set
// before the file could be named.
func (c *Config) LoadFileUnderFlags(path string, fs *flag.FlagSet) error {
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	*c = DefaultConfig()
	if err := LoadFile(path, c); err != nil {
		return err
	}
	for name, v := range given {
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("setting --%s again after the config file: %w", name, err)
		}
	}
	return nil
}

// PatternList is a repeatable flag of redaction patterns (the daemon's
// --redact-args, and `supervisor events`'s): each use adds a pattern. A value
// starting with '[' is a JSON list that replaces them all (what String
// gives, so that LoadFileUnderFlags can set the flag again after the
// file: the command line's list then wins over the file's whole); an
// empty value clears the list.
type PatternList []string

func (p *PatternList) String() string {
	if p == nil || len(*p) == 0 {
		return ""
	}
	b, _ := json.Marshal([]string(*p))
	return string(b)
}

func (p *PatternList) Set(s string) error {
	if s == "" {
		*p = nil // --redact-args '': none, whatever the file says
		return nil
	}
	// A pattern must be UTF-8, as in the configuration file: the flag is
	// set again from String (JSON), which would turn other bytes into
	// U+FFFD and so change what the pattern matches.
	if strings.HasPrefix(s, "[") {
		var l []string
		if !utf8.ValidString(s) {
			return errors.New("a JSON list of patterns: not valid UTF-8")
		}
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			return fmt.Errorf("a JSON list of patterns: %w", err)
		}
		*p = l
		return nil
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("pattern %q: not valid UTF-8", s)
	}
	*p = append(*p, s)
	return nil
}
