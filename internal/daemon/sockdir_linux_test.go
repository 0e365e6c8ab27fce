package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestPrepareSocketDir: a missing directory is created 0755 and owned by
// the daemon's user; a directory another user owns or may write to, or
// reached through one, is refused with ErrUnsafeSocketDir (and ErrConfig,
// so `supervisor run` exits 64), naming the directory at fault.
func TestPrepareSocketDir(t *testing.T) {
	euid := os.Geteuid()
	tests := []struct {
		name string
		root bool // chown to another uid needs root
		// setup makes what it needs under base and returns the socket path.
		setup func(t *testing.T, base string) string
		euid  int
		fault string // "" when accepted, else the path the error names
	}{
		{"missing, created", false, func(t *testing.T, base string) string {
			return filepath.Join(base, "a", "b", "api.sock")
		}, euid, ""},
		{"own, 0755", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "d", 0o755), "api.sock")
		}, euid, ""},
		{"own, 0700", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "d", 0o700), "api.sock")
		}, euid, ""},
		{"writable by others", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "d", 0o777), "api.sock")
		}, euid, "/d"},
		{"writable by its group", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "d", 0o775), "api.sock")
		}, euid, "/d"},
		{"sticky and world-writable is no socket directory", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "d", 0o777|os.ModeSticky), "api.sock")
		}, euid, "/d"},
		{"under a sticky world-writable directory", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, mkdir(t, base, "tmp", 0o777|os.ModeSticky), "d", 0o755), "api.sock")
		}, euid, ""},
		{"under a world-writable directory", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, mkdir(t, base, "open", 0o777), "d", 0o755), "api.sock")
		}, euid, "/open"},
		{"created under a world-writable directory", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "open", 0o777), "d", "api.sock")
		}, euid, "/open"},
		{"a file, not a directory", false, func(t *testing.T, base string) string {
			if err := os.WriteFile(filepath.Join(base, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "f", "api.sock")
		}, euid, "socket directory"},
		{"a symlink to a world-writable directory", false, func(t *testing.T, base string) string {
			open := mkdir(t, base, "open", 0o777)
			if err := os.Symlink(open, filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link", "api.sock")
		}, euid, "/open"},
		{"a symlink to a safe directory", false, func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o755)
			if err := os.Symlink(d, filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link", "api.sock")
		}, euid, ""},
		{"through another user's symlink in a sticky directory", true, func(t *testing.T, base string) string {
			tmp := mkdir(t, base, "tmp", 0o777|os.ModeSticky)
			d := mkdir(t, base, "d", 0o755)
			link := filepath.Join(tmp, "link")
			if err := os.Symlink(d, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "api.sock")
		}, 0, "/tmp/link is a symlink of uid 65534"},
		{"through root's symlink to another user's symlink", true, func(t *testing.T, base string) string {
			tmp := mkdir(t, base, "tmp", 0o777|os.ModeSticky)
			d := mkdir(t, base, "d", 0o755)
			theirs := filepath.Join(tmp, "theirs")
			if err := os.Symlink(d, theirs); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(theirs, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(theirs, filepath.Join(base, "mine")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "mine", "api.sock")
		}, 0, "/tmp/theirs is a symlink of uid 65534"},
		{"a \"..\" after another user's symlink", true, func(t *testing.T, base string) string {
			tmp := mkdir(t, base, "tmp", 0o777|os.ModeSticky)
			mkdir(t, tmp, "run", 0o755)
			elsewhere := mkdir(t, mkdir(t, base, "x", 0o755), "y", 0o755)
			link := filepath.Join(tmp, "link")
			if err := os.Symlink(elsewhere, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return link + "/../run/api.sock" // the kernel: base/x/run
		}, 0, `has a ".." component`},
		{"through root's relative symlink with \"..\" in it", false, func(t *testing.T, base string) string {
			mkdir(t, base, "run", 0o755)
			if err := os.Symlink("../run", filepath.Join(mkdir(t, base, "var", 0o755), "run")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "var", "run", "api.sock")
		}, euid, ""},
		{"through root's symlink in a sticky directory", true, func(t *testing.T, base string) string {
			tmp := mkdir(t, base, "tmp", 0o777|os.ModeSticky)
			d := mkdir(t, base, "d", 0o755)
			if err := os.Symlink(d, filepath.Join(tmp, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(tmp, "link", "api.sock")
		}, 0, ""},
		{"owned by another user", true, func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o755)
			chown(t, d, 65534)
			return filepath.Join(d, "api.sock")
		}, 0, "/d"},
		{"above it, a directory another user owns", true, func(t *testing.T, base string) string {
			theirs := mkdir(t, base, "theirs", 0o755)
			d := mkdir(t, theirs, "d", 0o755)
			chown(t, theirs, 65534)
			return filepath.Join(d, "api.sock")
		}, 0, "/theirs"},
		{"owned by the daemon's own user", true, func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o700)
			chown(t, d, 65534)
			return filepath.Join(d, "api.sock")
		}, 65534, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				testenv.RequireRoot(t)
			}
			base := t.TempDir()
			// The test's own temporary tree must pass: 0755 all the way.
			os.Chmod(base, 0o755)
			sock := tt.setup(t, base)
			err := prepareSocketDir(sock, tt.euid)
			if tt.fault == "" {
				if err != nil {
					t.Fatalf("prepareSocketDir(%s) = %v, want nil", sock, err)
				}
				fi, err := os.Stat(filepath.Dir(sock))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o022 != 0 {
					t.Errorf("socket directory mode %v, want no write for group or others", fi.Mode())
				}
				if owner := int(fi.Sys().(*syscall.Stat_t).Uid); owner != tt.euid {
					t.Errorf("socket directory owned by uid %d, want the daemon's %d", owner, tt.euid)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeSocketDir) && tt.fault != "socket directory" {
				t.Fatalf("prepareSocketDir(%s) = %v, want ErrUnsafeSocketDir", sock, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.fault) {
				t.Fatalf("prepareSocketDir(%s) = %v, want an error naming %q", sock, err, tt.fault)
			}
			if errors.Is(err, ErrUnsafeSocketDir) && !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
		})
	}
}

// TestPrepareSocketDirCreatesRootsDirectory: as root, the directory made
// for the socket is root's and mode 0755 whatever the umask, like the
// unit's RuntimeDirectory.
func TestPrepareSocketDirCreatesRootsDirectory(t *testing.T) {
	testenv.RequireRoot(t)
	base := t.TempDir()
	os.Chmod(base, 0o755)
	sock := filepath.Join(base, "procsupervisor", "api.sock")
	if err := prepareSocketDir(sock, 0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Dir(sock))
	if err != nil {
		t.Fatal(err)
	}
	if st := statOwner(fi); fi.Mode().Perm() != 0o755 || st != 0 {
		t.Errorf("created %s: mode %v uid %d, want 0755 and root", filepath.Dir(sock), fi.Mode().Perm(), st)
	}
}

// TestPrepareStateDir: the state directory is created 0700, owned by the
// daemon's user; one another user owns or may write to, or reached through
// a directory others may write to without the sticky bit, is refused with
// ErrUnsafeStateDir and ErrConfig: a user who can put a symlink there has
// root write its jobs' output where the link points.
func TestPrepareStateDir(t *testing.T) {
	euid := os.Geteuid()
	tests := []struct {
		name  string
		root  bool
		setup func(t *testing.T, base string) string
		ok    bool
	}{
		{"missing, created", false, func(t *testing.T, base string) string { return filepath.Join(base, "a", "state") }, true},
		{"own, 0700", false, func(t *testing.T, base string) string { return mkdir(t, base, "state", 0o700) }, true},
		{"under a sticky world-writable directory", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "tmp", 0o777|os.ModeSticky), "state")
		}, true},
		{"writable by its group", false, func(t *testing.T, base string) string { return mkdir(t, base, "state", 0o770) }, false},
		{"created under a world-writable directory", false, func(t *testing.T, base string) string {
			return filepath.Join(mkdir(t, base, "open", 0o777), "state")
		}, false},
		{"a symlink to a directory in a world-writable one", false, func(t *testing.T, base string) string {
			d := mkdir(t, mkdir(t, base, "open", 0o777), "state", 0o700)
			if err := os.Symlink(d, filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link")
		}, false},
		{"owned by another user", true, func(t *testing.T, base string) string {
			d := mkdir(t, base, "state", 0o700)
			chown(t, d, 65534)
			return d
		}, false},
		{"through another user's symlink in a sticky directory", true, func(t *testing.T, base string) string {
			link := filepath.Join(mkdir(t, base, "tmp", 0o777|os.ModeSticky), "link")
			if err := os.Symlink(mkdir(t, base, "roots", 0o755), link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "state")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				testenv.RequireRoot(t)
			}
			base := t.TempDir()
			os.Chmod(base, 0o755)
			dir := tt.setup(t, base)
			_, existed := os.Stat(dir)
			err := prepareStateDir(dir, euid)
			if _, now := os.Stat(dir); !tt.ok && existed != nil && now == nil {
				t.Errorf("prepareStateDir(%s) created it before refusing it", dir)
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("prepareStateDir(%s) = %v, want nil", dir, err)
				}
				fi, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o077 != 0 || int(fi.Sys().(*syscall.Stat_t).Uid) != euid {
					t.Errorf("state directory mode %v owner %d, want 0700 and uid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, euid)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeStateDir) || !errors.Is(err, ErrConfig) {
				t.Fatalf("prepareStateDir(%s) = %v, want ErrUnsafeStateDir and ErrConfig", dir, err)
			}
		})
	}
}

// TestPrepareStateDirRace: a missing parent of the state directory, in a
// sticky world-writable directory, made a symlink by another user after
// the checks and before the creation, is refused, and nothing is made
// where it points. Before, MkdirAll followed it and root made the state
// directory in a directory of the other user's choosing.
func TestPrepareStateDirRace(t *testing.T) {
	testenv.RequireRoot(t)
	base := t.TempDir()
	os.Chmod(base, 0o755)
	tmp := mkdir(t, base, "tmp", 0o777|os.ModeSticky)
	target := mkdir(t, base, "target", 0o755)
	parent := filepath.Join(tmp, "missing")
	beforeMkdir = func() {
		if err := os.Symlink(target, parent); err != nil {
			t.Error(err)
		}
		if err := os.Lchown(parent, 65534, 65534); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeMkdir = nil })
	err := prepareStateDir(filepath.Join(parent, "state"), os.Geteuid())
	if !errors.Is(err, ErrUnsafeStateDir) || !errors.Is(err, ErrConfig) {
		t.Errorf("prepareStateDir through a symlink planted after the checks = %v, want ErrUnsafeStateDir and ErrConfig", err)
	}
	if _, err := os.Lstat(filepath.Join(target, "state")); err == nil {
		t.Error("the state directory was made where the other user's symlink pointed")
	}
}

// TestRunRefusesUnsafeSocketDir: the daemon does not start, and serves
// nothing, on a socket directory others may write to.
func TestRunRefusesUnsafeSocketDir(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	open := mkdir(t, base, "open", 0o777)
	cfg := DefaultConfig()
	cfg.StateDir = filepath.Join(base, "state")
	cfg.Socket = filepath.Join(open, "api.sock")
	cfg.LogOutput = "file:" + filepath.Join(base, "log.json")
	// Should it start anyway, the test fails instead of serving forever.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := false
	err := Run(ctx, cfg, func(Info) { served = true; cancel() })
	if !errors.Is(err, ErrUnsafeSocketDir) || served {
		t.Fatalf("Run with socket dir 0777 = %v (served %v), want ErrUnsafeSocketDir before serving", err, served)
	}
	if _, err := os.Lstat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s: %v, want none created", cfg.Socket, err)
	}
}

// TestRunRefusesUnsafeLogDir: a log file in a directory others may write
// to (the feed in /tmp itself) could be another user's file or symlink,
// which the daemon would append every process's events to as root: it
// does not start, and writes nothing there.
func TestRunRefusesUnsafeLogDir(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky} {
		open := mkdir(t, base, fmt.Sprintf("open-%o", uint32(mode)), mode)
		cfg := DefaultConfig()
		cfg.StateDir = filepath.Join(base, "state")
		cfg.Socket = filepath.Join(base, "run", "api.sock")
		cfg.LogOutput = "file:" + filepath.Join(open, "feed.json")
		ctx, cancel := context.WithCancel(context.Background())
		served := false
		err := Run(ctx, cfg, func(Info) { served = true; cancel() })
		cancel()
		if !errors.Is(err, ErrUnsafeLogDir) || !errors.Is(err, ErrConfig) || served {
			t.Fatalf("Run with the log in a %v directory = %v (served %v), want ErrUnsafeLogDir before serving", mode, err, served)
		}
		if _, err := os.Lstat(filepath.Join(open, "feed.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("log file in a %v directory: %v, want none created", mode, err)
		}
	}
}

// TestRunRefusesUnsafeMetricsDir: a metrics socket in a directory others
// may write to (/tmp itself) could be replaced by a file or socket of
// theirs, which the daemon removed as root to listen in its place: it
// does not start, and removes nothing there.
func TestRunRefusesUnsafeMetricsDir(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky} {
		open := mkdir(t, base, fmt.Sprintf("open-%o", uint32(mode)), mode)
		theirs := filepath.Join(open, "metrics.sock")
		ln, err := net.Listen("unix", theirs)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cfg := DefaultConfig()
		cfg.StateDir = filepath.Join(base, "state")
		cfg.Socket = filepath.Join(base, "run", "api.sock")
		cfg.MetricsListen = "unix:" + theirs
		ctx, cancel := context.WithCancel(context.Background())
		served := false
		err = Run(ctx, cfg, func(Info) { served = true; cancel() })
		cancel()
		if !errors.Is(err, ErrUnsafeMetricsDir) || !errors.Is(err, ErrConfig) || served {
			t.Fatalf("Run with the metrics socket in a %v directory = %v (served %v), want ErrUnsafeMetricsDir before serving", mode, err, served)
		}
		if _, err := os.Lstat(theirs); err != nil {
			t.Errorf("the socket already at %s in a %v directory: %v, want it left alone", theirs, mode, err)
		}
	}
}

func mkdir(t *testing.T, parent, name string, mode os.FileMode) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	// Chmod, not Mkdir's mode: the umask would take bits off.
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

func statOwner(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// TestRunCollectorSettings: Run sets the collector's growth target and soft
// limit unless the environment does (GOGC, GOMEMLIMIT).
func TestRunCollectorSettings(t *testing.T) {
	prevGC, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) })
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	for _, tt := range []struct {
		env       string
		wantGC    uint64
		wantLimit int64
	}{{"", GCPercent, softMemoryLimit}, {"150", 77, math.MaxInt64}} {
		t.Setenv("GOGC", tt.env)
		t.Setenv("GOMEMLIMIT", tt.env)
		debug.SetGCPercent(77)
		debug.SetMemoryLimit(math.MaxInt64)
		base := t.TempDir()
		os.Chmod(base, 0o755)
		cfg := DefaultConfig()
		cfg.StateDir = filepath.Join(base, "state")
		cfg.Socket = filepath.Join(mkdir(t, base, "open", 0o777), "api.sock")
		cfg.LogOutput = "file:" + filepath.Join(base, "log.json")
		if err := Run(context.Background(), cfg, nil); !errors.Is(err, ErrUnsafeSocketDir) {
			t.Fatalf("Run = %v, want ErrUnsafeSocketDir", err)
		}
		if got, lim := gogc(), debug.SetMemoryLimit(-1); got != tt.wantGC || lim != tt.wantLimit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: collector at %d%%, limit %d; want %d%%, %d", tt.env, tt.env, got, lim, tt.wantGC, tt.wantLimit)
		}
	}
}
