package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// configUser creates a user with useradd (no home) and returns its
// credentials; the user is removed when the test ends.
func configUser(t *testing.T) *syscall.Credential {
	t.Helper()
	name := fmt.Sprintf("svcfg%d", os.Getpid()%1000000)
	if out, err := exec.Command("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		testenv.Skip(t, "useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	var uid, gid uint32
	for id, flag := range map[*uint32]string{&uid: "-u", &gid: "-g"} {
		out, err := exec.Command("id", flag, name).Output()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(string(out), id); err != nil {
			t.Fatal(err)
		}
	}
	return &syscall.Credential{Uid: uid, Gid: gid}
}

// asUser runs argv as cred, failing the test if it fails.
func asUser(t *testing.T, cred *syscall.Credential, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q as uid %d: %v: %s", argv, cred.Uid, err, out)
	}
}

// TestIntegrationConfigFileTrust: root's daemon reads a config file only
// where no other user could have chosen its content. A user got a file
// of root's holding their JSON by a hard link, made in a sticky directory,
// to a job's output the daemon then took back (root's, mode 0), and by a
// symlink to /proc/PID/comm of a setuid program they ran by a name that
// was the JSON; both passed --check-config and were used. Each case here
// holds a config that decodes (`{}` or one key), so only the file checks
// can refuse it.
func TestIntegrationConfigFileTrust(t *testing.T) {
	testenv.RequireRoot(t)
	user := configUser(t)
	base := testenv.ReachableDir(t, 0o755) // the user must reach the directories the cases make
	n := 0
	mkdir := func(mode os.FileMode) string {
		t.Helper()
		n++
		d := filepath.Join(base, fmt.Sprint(n))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	write := func(dir string) string {
		t.Helper()
		p := filepath.Join(dir, "sup.json")
		if err := os.WriteFile(p, []byte(`{"quota_claims":0}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	tests := []struct {
		name string
		make func(t *testing.T) string
		// want is in the error's text; "" for a file that is read.
		want string
	}{
		{"good file in a root 0755 dir", func(t *testing.T) string { return write(mkdir(0o755)) }, ""},
		{"good file, relative path", func(t *testing.T) string {
			p := write(mkdir(0o755))
			t.Chdir(filepath.Dir(p))
			return "sup.json"
		}, ""},
		{"symlink final component, root's", func(t *testing.T) string {
			d := mkdir(0o755)
			real := write(d)
			link := filepath.Join(d, "link.json")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symlink, which is not followed; pass the path of the file it names"},
		{"dir 0777", func(t *testing.T) string { return write(mkdir(0o777)) }, "is writable by its group or others"},
		{"dir 1777", func(t *testing.T) string { return write(mkdir(0o777 | os.ModeSticky)) }, "is writable by its group or others"},
		{"dir 0775", func(t *testing.T) string { return write(mkdir(0o775)) }, "is writable by its group or others"},
		{"another user's dir", func(t *testing.T) string {
			d := mkdir(0o755)
			if err := os.Chown(d, int(user.Uid), int(user.Gid)); err != nil {
				t.Fatal(err)
			}
			return write(d)
		}, fmt.Sprintf("is owned by uid %d", user.Uid)},
		{"another user's symlink to a root dir, in a sticky dir", func(t *testing.T) string {
			good := mkdir(0o755)
			write(good)
			sticky := mkdir(0o777 | os.ModeSticky)
			asUser(t, user, "ln", "-s", good, filepath.Join(sticky, "cfgdir"))
			return filepath.Join(sticky, "cfgdir", "sup.json")
		}, fmt.Sprintf("is a symlink of uid %d", user.Uid)},
		{"another user's 0777 dir above a root dir", func(t *testing.T) string {
			open := mkdir(0o777)
			if err := os.Chown(open, int(user.Uid), int(user.Gid)); err != nil {
				t.Fatal(err)
			}
			d := filepath.Join(open, "etc")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return write(d)
		}, fmt.Sprintf("is owned by uid %d", user.Uid)},
		{"hard-linked file", func(t *testing.T) string {
			d := mkdir(0o755)
			p := write(d)
			if err := os.Link(p, filepath.Join(d, "other")); err != nil {
				t.Fatal(err)
			}
			return p
		}, "has 2 links"},
		{"/proc file of root's holding JSON", func(t *testing.T) string {
			// A process run by a name that is JSON: its comm is "{}".
			d := mkdir(0o755)
			name := filepath.Join(d, "{}")
			sleep, err := exec.LookPath("sleep")
			if err != nil {
				t.Skip(err)
			}
			if err := os.Symlink(sleep, name); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(name, "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			p := fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)
			if b, _ := os.ReadFile(p); string(b) != "{}\n" {
				t.Fatalf("%s = %q, want {}", p, b)
			}
			return p
		}, "is on procfs"},
		{"/sys file", func(t *testing.T) string {
			const p = "/sys/kernel/uevent_seqnum"
			if _, err := os.Stat(p); err != nil {
				testenv.Skip(t, "%v", err)
			}
			return p
		}, "is on sysfs"},
		{"FIFO", func(t *testing.T) string {
			p := filepath.Join(mkdir(0o755), "sup.json")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			// Without O_NONBLOCK the open waits for a writer: this one
			// ends a blocked open when the test does.
			t.Cleanup(func() {
				if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
			return p
		}, "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.make(t)
			cfg := DefaultConfig()
			done := make(chan error, 1)
			go func() { done <- LoadFile(p, &cfg) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("LoadFile(%s) still blocked after 5s", p)
			}
			if tc.want == "" {
				if err != nil || cfg.QuotaClaims != 0 {
					t.Errorf("LoadFile(%s) = %v (quota_claims %d), want it read", p, err, cfg.QuotaClaims)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeConfig) || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadFile(%s) = %v, want ErrUnsafeConfig and ErrConfig saying %q", p, err, tc.want)
			}
			if cfg.QuotaClaims != DefaultQuotaClaims {
				t.Errorf("LoadFile(%s) took quota_claims %d from a refused file", p, cfg.QuotaClaims)
			}
		})
	}
}

// TestConfigFileMissing: a missing config file, or one in a missing
// directory, is an error wrapping fs.ErrNotExist (`supervisor events`
// reads the installed one only if it is there).
func TestConfigFileMissing(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "none.json"), filepath.Join(dir, "none", "none.json")} {
		cfg := DefaultConfig()
		if err := LoadFile(p, &cfg); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("LoadFile(%s) = %v, want fs.ErrNotExist", p, err)
		}
	}
}

// TestConfigCheckPaths: CheckPaths refuses, creating nothing, the
// directories Run refuses: a state directory, a socket directory, a log
// file's directory or a metrics socket's directory another user may write
// to; a missing state or socket directory under a good parent passes and
// is not made.
func TestConfigCheckPaths(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	state, sock := filepath.Join(base, "a", "state"), filepath.Join(base, "run", "api.sock")
	tests := []struct {
		name string
		mut  func(*Config)
		want error
	}{
		{"good, missing dirs", func(*Config) {}, nil},
		{"state dir made in a sticky dir", func(c *Config) { c.StateDir = filepath.Join(open, "state") }, nil},
		{"state dir sticky", func(c *Config) { c.StateDir = open }, ErrUnsafeStateDir},
		{"socket in a sticky dir", func(c *Config) { c.Socket = filepath.Join(open, "api.sock") }, ErrUnsafeSocketDir},
		{"log file in a sticky dir", func(c *Config) { c.LogOutput = "file:" + filepath.Join(open, "feed.log") }, ErrUnsafeLogDir},
		{"metrics socket in a sticky dir", func(c *Config) { c.MetricsListen = "unix:" + filepath.Join(open, "m.sock") }, ErrUnsafeMetricsDir},
		{"metrics on tcp", func(c *Config) { c.MetricsListen = "127.0.0.1:9464" }, nil},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		c.StateDir, c.Socket = state, sock
		tc.mut(&c)
		err := c.CheckPaths()
		if tc.want == nil && err != nil || tc.want != nil && (!errors.Is(err, tc.want) || !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: CheckPaths() = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, d := range []string{filepath.Dir(state), filepath.Dir(sock), filepath.Join(open, "state")} {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("CheckPaths made %s (%v)", d, err)
		}
	}
}
