package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events/tracepoint"
	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/metrics"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

// GCPercent is the collector's growth target (GOGC) for the daemon and the
// events command, unless the environment sets one: the event path's garbage
// is short-lived. Collecting at 4x the live heap instead of 2x, under the
// soft memory limit, halves the collector's share of an exec storm with
// 4 KiB argument vectors (24 cycles per 20,000 execs at GOGC=100) while
// the heap stays a few MiB when idle.
const GCPercent = 300

// SetGCPercent sets the collector to GCPercent, unless GOGC is set.
func SetGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}

// ErrConfig wraps every error about a configuration that cannot work.
var ErrConfig = errors.New("invalid configuration")

// ErrUnsafeConfig: another user could have chosen the config file's
// content: its directory (or one above it) is theirs or writable by them,
// or the file is a symlink, has another link, is a kernel file (procfs,
// sysfs), or is theirs or writable by them. Errors also wrap ErrConfig.
var ErrUnsafeConfig = errors.New("unsafe config file")

// ErrUnsupported: the daemon does not run on this system.
var ErrUnsupported = errors.New("the supervisor daemon runs on Linux only")

// Config is what `supervisor run` takes from its flags or its config file
// (JSON, the same keys as the flags with underscores: {"state_dir": ...}).
// Unknown keys in the file are an error. Durations are api.Duration: Go
// duration text in the file, a flag.Value on the command line.
type Config struct {
	StateDir string `json:"state_dir"`
	Socket   string `json:"socket"`
	// SocketGroup is the group (name or number) of the socket; the socket
	// is mode 0660, so members of that group may call the API.
	SocketGroup string `json:"socket_group"`
	// Mechanism is auto, ebpf, netlink, proc or ps.
	Mechanism string `json:"mechanism"`
	// LogOutput and LogSchema go to internal/logfeed (Config.Output,
	// Config.Schema); LogProcessEvents are the kinds of process events
	// logged a line each (Config.ProcessEvents): true or false in the
	// file as before (every fork, exec and exit, or none), or a string
	// listing kinds ("exec,exit"); the flag takes the same text.
	LogOutput        string        `json:"log_output"`
	LogSchema        string        `json:"log_schema"`
	LogProcessEvents logfeed.Kinds `json:"log_process_events"`
	// ArgvMax bounds the argument bytes an eBPF exec event carries
	// (tracepoint.WithArgvMax; past it the event says it was cut).
	ArgvMax int `json:"argv_max"`
	// LogUserBytes is the process-line bytes a second one user's
	// processes may put in the log feed with their arguments
	// (logfeed.Config.UserBytes: 0 the default, negative no bound).
	LogUserBytes int64 `json:"log_user_bytes"`
	// RedactArgs are the argument redaction patterns (internal/redact)
	// applied to every exec's arguments before the log feed, the event
	// stream and the exec cache see them.
	RedactArgs []string `json:"redact_args"`
	// Grace is the default teardown grace period.
	Grace api.Duration `json:"grace"`
	// ReapInterval is how often the reaper runs on its own (it also runs
	// on every holder exit).
	ReapInterval api.Duration `json:"reap_interval"`
	// RetainFinal is how long a finished claim (released, dropped, or a
	// job whose result was picked up) stays in the store; RetainOwed is how
	// long a job's result waits for its caller; MaxFinal caps finished
	// claims kept (oldest dropped first).
	RetainFinal api.Duration `json:"retain_final"`
	RetainOwed  api.Duration `json:"retain_owed"`
	MaxFinal    int          `json:"max_final"`
	// Cgroup is "auto" (a child of the daemon's own cgroup v2 group, found
	// through /proc/self/mountinfo and /proc/self/cgroup), "off", or the
	// directory under which each grant gets its cgroup.
	Cgroup string `json:"cgroup"`
	// GraphMaxExited and GraphMaxExitedAge bound the exited processes the
	// lineage graph keeps once no live process needs them (count and age).
	GraphMaxExited    int          `json:"graph_max_exited"`
	GraphMaxExitedAge api.Duration `json:"graph_max_exited_age"`
	// MetricsListen is where Prometheus metrics are served: host:port or
	// unix:/path. Empty (the default) serves none.
	MetricsListen string `json:"metrics_listen"`
	// Quotas of each uid but root: live claims and the bytes its claims
	// store (argv, cwd, owner, members), 0 for no limit; and how many of
	// its failed launches are kept (older ones are deleted; 0 keeps none).
	QuotaClaims int   `json:"quota_claims"`
	QuotaBytes  int64 `json:"quota_bytes"`
	QuotaFailed int   `json:"quota_failed"`
	// JobOutputMax bounds the bytes of a job's output file the disk
	// holds: past it the daemon drops the oldest (outbound_linux.go). 0
	// for no bound.
	JobOutputMax int64 `json:"job_output_max"`
	// Fairness of the API to each uid but root (internal/api Limits):
	// connections served at once, requests a second and at once, and
	// long-lived requests (a release or kill waiting out its grace).
	ConnsPerUID int     `json:"conns_per_uid"`
	RatePerUID  float64 `json:"rate_per_uid"`
	BurstPerUID int     `json:"burst_per_uid"`
	LongPerUID  int     `json:"long_per_uid"`
	// SandboxedCallers is "serve" (the default) or "refuse": whether a
	// caller but root that may be confined in ways the daemon cannot
	// carry (a thread with no_new_privs, or a user namespace of its own:
	// a Landlock domain; api.WithRefuseConfinable) is served, or answered
	// status alone.
	SandboxedCallers string `json:"sandboxed_callers"`

	// Version is logged and served; not from the file.
	Version string `json:"-"`
}

// Defaults for Config.
const (
	DefaultReapInterval = 30 * time.Second
	DefaultRetainFinal  = 7 * 24 * time.Hour
	DefaultRetainOwed   = 30 * 24 * time.Hour
	DefaultMaxFinal     = 10000
	DefaultQuotaClaims  = 1000
	DefaultQuotaBytes   = 16 << 20
	DefaultQuotaFailed  = 16
	DefaultJobOutputMax = 64 << 20
)

// DefaultConfig returns the defaults for the user running the daemon: as
// root RootStateDir and RootSocket, otherwise under $XDG_STATE_HOME and
// $XDG_RUNTIME_DIR.
func DefaultConfig() Config {
	return Config{
		StateDir:     DefaultStateDir(),
		Socket:       DefaultSocket(),
		Mechanism:    "auto",
		LogOutput:    "stdout",
		LogSchema:    "ecs",
		Grace:        api.Duration(actions.DefaultGrace),
		ReapInterval: api.Duration(DefaultReapInterval),
		RetainFinal:  api.Duration(DefaultRetainFinal),
		RetainOwed:   api.Duration(DefaultRetainOwed),
		MaxFinal:     DefaultMaxFinal,
		Cgroup:       "auto",
		QuotaClaims:  DefaultQuotaClaims,
		QuotaBytes:   DefaultQuotaBytes,
		QuotaFailed:  DefaultQuotaFailed,
		JobOutputMax: DefaultJobOutputMax,
		ConnsPerUID:  api.DefaultLimits.UserConns,
		RatePerUID:   api.DefaultLimits.Rate,
		BurstPerUID:  api.DefaultLimits.Burst,
		LongPerUID:   api.DefaultLimits.UserLong,

		SandboxedCallers: "serve",

		ArgvMax:           tracepoint.DefaultArgvMax,
		LogUserBytes:      logfeed.DefaultUserBytes,
		GraphMaxExited:    lineage.DefaultMaxExited,
		GraphMaxExitedAge: api.Duration(lineage.DefaultMaxExitedAge),
	}
}

// Root's paths, the ones the packages (procsupervisor.deb and .rpm) and
// their unit use. They are named procsupervisor, not supervisor: Debian's
// supervisor package (supervisord) owns /etc/supervisor, the unit
// supervisor.service and the socket /run/supervisor.sock, and both must be
// installable side by side. packaging_test.go checks that the unit agrees.
const (
	RootStateDir = "/var/lib/procsupervisor"
	RootSocket   = "/run/procsupervisor/api.sock"
)

// DefaultStateDir is RootStateDir for root, else
// $XDG_STATE_HOME/supervisor (~/.local/state/supervisor).
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return RootStateDir
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "supervisor")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "supervisor")
}

// DefaultSocket is RootSocket for root, else
// $XDG_RUNTIME_DIR/supervisor.sock (/run/user/UID when unset).
func DefaultSocket() string {
	if os.Geteuid() == 0 {
		return RootSocket
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "supervisor.sock")
	}
	return filepath.Join("/run/user", strconv.Itoa(os.Getuid()), "supervisor.sock")
}

// SocketEnv names the environment variable that tells clients the daemon's
// socket.
const SocketEnv = "SUPERVISOR_SOCKET"

// FindSocket returns the socket a client should call: flagVal when set, else
// $SUPERVISOR_SOCKET, else DefaultSocket. There is no fallback to another
// path: a client that finds nothing there says so (SocketHint) rather than
// calling whatever listens at an older path, which may be supervisord.
func FindSocket(flagVal string) string {
	switch {
	case flagVal != "":
		return flagVal
	case os.Getenv(SocketEnv) != "":
		return os.Getenv(SocketEnv)
	}
	return DefaultSocket()
}

// otherSocket is a socket a client did not ask for but may have meant:
// root's, for a user whose default is their own, or one where root's daemon
// listened before the package was renamed procsupervisor.
type otherSocket struct{ path, what string }

var otherSockets = []otherSocket{
	{RootSocket, "root's daemon listens there; members of its socket group may use it"},
	{"/run/supervisor.sock", "Debian's supervisord listens there, and so did this daemon by default before it was renamed procsupervisor"},
	{"/run/supervisor/supervisor.sock", "the unit supervisor.service of this daemon's package before it was renamed procsupervisor listened there"},
}

// SocketHint explains a socket a client could not reach: empty when sock
// exists (the client's own error says what went wrong), else a sentence
// saying that nothing listens at sock, and naming any other socket found
// (otherSockets), which the client does not try on its own.
func SocketHint(sock string) string {
	return socketHint(sock, otherSockets)
}

// ExplainUnreachable returns err, the error of a client that could not
// reach sock, with SocketHint's sentence on a line of its own when it has
// one. errors.Is and errors.As see err as before.
func ExplainUnreachable(err error, sock string) error {
	if h := SocketHint(sock); h != "" {
		return fmt.Errorf("%w\n%s", err, h)
	}
	return err
}

func socketHint(sock string, others []otherSocket) string {
	if _, err := os.Lstat(sock); err == nil || !errors.Is(err, os.ErrNotExist) {
		return ""
	}
	h := "no socket at " + sock + ": is the daemon running?"
	if sock == RootSocket {
		h = "no socket at " + sock + ": is the daemon running (systemctl status procsupervisor)?"
	}
	for _, o := range others {
		if o.path == sock {
			continue
		}
		if fi, err := os.Lstat(o.path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			h += "\n" + o.path + " exists (" + o.what + "): it is not tried; pass --socket " + o.path + " (or set " + SocketEnv + ") if it is this supervisor's."
		}
	}
	return h
}

// maxConfigBytes bounds a config file.
const maxConfigBytes = 1 << 20

// LoadFile reads a JSON config file over cfg: keys present in the file
// replace cfg's values, absent keys leave them. A file another user could
// have chosen the content of (openConfig) is refused with an error
// wrapping ErrUnsafeConfig and ErrConfig; a missing one with one wrapping
// fs.ErrNotExist.
func LoadFile(path string, cfg *Config) error {
	f, err := openConfig(path, os.Geteuid())
	if err != nil {
		return err
	}
	defer f.Close()
	// One byte past the bound is enough for the decoder to refuse it.
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err := decodeConfig(b, cfg); err != nil {
		return fmt.Errorf("config %s: %v: %w", path, err, ErrConfig)
	}
	return nil
}

func decodeConfig(b []byte, cfg *Config) error { return jsonx.DecodeUnique(b, maxConfigBytes, cfg) }

// Validate checks the values.
func (c *Config) Validate() error {
	switch {
	case c.StateDir == "" || !filepath.IsAbs(c.StateDir):
		return fmt.Errorf("state_dir %q: want an absolute path: %w", c.StateDir, ErrConfig)
	case c.Socket == "" || !filepath.IsAbs(c.Socket):
		return fmt.Errorf("socket %q: want an absolute path: %w", c.Socket, ErrConfig)
	case len(c.Socket) > 107:
		return fmt.Errorf("socket %q: longer than a unix socket path may be: %w", c.Socket, ErrConfig)
	case c.Grace < 0 || time.Duration(c.Grace) > api.MaxGrace:
		return fmt.Errorf("grace %v: want 0 to %v: %w", c.Grace, api.MaxGrace, ErrConfig)
	case c.ReapInterval < api.Duration(100*time.Millisecond):
		return fmt.Errorf("reap_interval %v: want at least 100ms: %w", time.Duration(c.ReapInterval), ErrConfig)
	case c.RetainFinal < 0 || c.RetainOwed < 0 || c.MaxFinal < 0:
		return fmt.Errorf("retention bounds must not be negative: %w", ErrConfig)
	case c.Cgroup != "auto" && c.Cgroup != "off" && !filepath.IsAbs(c.Cgroup):
		return fmt.Errorf("cgroup %q: want auto, off or an absolute path: %w", c.Cgroup, ErrConfig)
	case !slices.Contains(tracker.Mechanisms, c.Mechanism):
		return fmt.Errorf("mechanism %q: want one of %v: %w", c.Mechanism, tracker.Mechanisms, ErrConfig)
	case c.LogProcessEvents&^logfeed.AllKinds != 0:
		return fmt.Errorf("log_process_events %v: want kinds from fork, exec, exit: %w", c.LogProcessEvents, ErrConfig)
	case c.LogSchema != logfeed.SchemaECS && c.LogSchema != logfeed.SchemaOCSF:
		return fmt.Errorf("log_schema %q: want %s or %s: %w", c.LogSchema, logfeed.SchemaECS, logfeed.SchemaOCSF, ErrConfig)
	case c.QuotaClaims < 0 || c.QuotaBytes < 0 || c.QuotaFailed < 0 || c.JobOutputMax < 0:
		return fmt.Errorf("quotas must not be negative: %w", ErrConfig)
	case c.ConnsPerUID < 1 || c.RatePerUID <= 0 || c.BurstPerUID < 1 || c.LongPerUID < 1:
		return fmt.Errorf("conns_per_uid, rate_per_uid, burst_per_uid and long_per_uid must be positive: %w", ErrConfig)
	case c.LogUserBytes > logfeed.MaxUserBytes:
		return fmt.Errorf("log_user_bytes %d: want at most %d (0: the default, negative: no bound): %w", c.LogUserBytes, int64(logfeed.MaxUserBytes), ErrConfig)
	case c.ArgvMax < 0 || c.ArgvMax > tracepoint.MaxArgvMax:
		return fmt.Errorf("argv_max %d: want 0 to %d bytes: %w", c.ArgvMax, tracepoint.MaxArgvMax, ErrConfig)
	case c.GraphMaxExited < 0 || c.GraphMaxExitedAge < 0:
		return fmt.Errorf("graph retention bounds must not be negative: %w", ErrConfig)
	case c.SandboxedCallers != "serve" && c.SandboxedCallers != "refuse":
		return fmt.Errorf("sandboxed_callers %q: want serve or refuse: %w", c.SandboxedCallers, ErrConfig)
	}
	if _, err := redact.Parse(c.RedactArgs); err != nil {
		return fmt.Errorf("redact_args: %v: %w", err, ErrConfig)
	}
	if c.MetricsListen != "" {
		if err := metrics.CheckAddress(c.MetricsListen); err != nil {
			return fmt.Errorf("metrics_listen: %v: %w", err, ErrConfig)
		}
	}
	if _, err := logfeed.ParseOutput(c.LogOutput); err != nil {
		return fmt.Errorf("log_output %q: %v: %w", c.LogOutput, err, ErrConfig)
	}
	return nil
}

// Errors Run returns that callers tell apart.
var (
	// ErrAlreadyRunning: another daemon holds the state directory.
	ErrAlreadyRunning = errors.New("another supervisor daemon holds the state directory")
	// ErrMechanism: Run's event mechanism (Config.Mechanism) cannot start
	// on this host; the tracker's error it wraps says which and why.
	ErrMechanism = errors.New("event mechanism cannot start")
	// ErrStore: the store cannot be read; the daemon refuses to start.
	ErrStore = errors.New("store cannot be read; refusing to start")
)

// Info describes a daemon that started serving.
type Info struct {
	Socket    string
	Mechanism string
	Reconcile api.Report
}

// APILimits are the API server's limits this configuration sets.
func (c *Config) APILimits() api.Limits {
	l := api.DefaultLimits
	l.UserConns, l.Rate, l.Burst, l.UserLong = c.ConnsPerUID, c.RatePerUID, c.BurstPerUID, c.LongPerUID
	return l
}

// CheckHost checks what the values name on this host, beyond Validate
// (which a configuration passes wherever it is read): the socket group
// exists here. `run --check-config` and Run ask both.
func (c *Config) CheckHost() error { return checkGroup(c.SocketGroup) }

// CheckPaths checks, creating nothing, the directories Run checks before
// it serves (those of the state, the socket, a log file and a metrics
// socket; checkPaths), so that `run --check-config` refuses what Run
// would: a state or socket directory Run would create passes where its
// deepest existing parent would. Run makes the same checks itself, as it
// creates what is missing. An unsafe directory is an error wrapping
// ErrConfig.
func (c *Config) CheckPaths() error { return c.checkPaths(os.Geteuid()) }

// checkGroup refuses a socket group that is neither a group id nor a name
// the local group database has: found only when the socket was made, it
// passed --check-config and failed the start as an internal error.
func checkGroup(g string) error {
	if g == "" {
		return nil
	}
	if n, err := strconv.ParseUint(g, 10, 32); err == nil && n < 1<<32-1 {
		return nil
	}
	if _, err := user.LookupGroup(g); err != nil {
		return fmt.Errorf("socket_group %q: %v: %w", g, err, ErrConfig)
	}
	return nil
}

// checkConfigFile refuses a config file that another user than root and
// euid owns or may write to: it sets what the daemon, as root, runs with
// (its state directory, its socket's group, the log it appends to), and
// was read whoever had written it.
func checkConfigFile(f *os.File, euid int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case !ok:
		return nil
	case st.Uid != 0 && int(st.Uid) != euid:
		return fmt.Errorf("owned by uid %d (not root, nor the daemon's uid %d): that user sets what the daemon runs with", st.Uid, euid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("mode %v: writable by others than its owner, who set what the daemon runs with; chmod go-w it", fi.Mode().Perm())
	}
	return nil
}
