// Package packaging holds the service files, the example configuration and
// the nfpm config; it has no Go code. Its tests keep those files in step
// with the daemon: the example config must load and validate with the
// daemon's own parser, every config key must be documented, the socket and
// state paths must agree across the binary's defaults, the unit, the config
// and the manifests, no packaged path may be one Debian's supervisor
// (supervisord) ships, and the unit must pass systemd-analyze verify where
// systemd-analyze exists.
package packaging

import (
	"bufio"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// The unit, the config and the manifests use root's defaults of the binary.
const (
	socket   = daemon.RootSocket
	stateDir = daemon.RootStateDir
	unitFile = "procsupervisor.service"
	// confPath is where the packages install supervisor.conf.example.
	confPath = "/etc/procsupervisor/procsupervisor.conf"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configKeys returns the JSON keys of daemon.Config.
func configKeys() []string {
	var keys []string
	rt := reflect.TypeFor[daemon.Config]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// TestExampleConfig: the example loads with the daemon's parser (unknown
// keys are an error there), validates, sets every key, and matches the
// socket of the unit.
func TestExampleConfig(t *testing.T) {
	cfg := daemon.DefaultConfig()
	// A copy of its own: the daemon reads a config only from a directory
	// no other user may write, which a checkout's need not be.
	conf := filepath.Join(t.TempDir(), "procsupervisor.conf")
	if err := os.WriteFile(conf, []byte(read(t, "supervisor.conf.example")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := daemon.LoadFile(conf, &cfg); err != nil {
		t.Fatalf("LoadFile(supervisor.conf.example) = %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(example) = %v", err)
	}
	if cfg.Socket != socket {
		t.Errorf("example socket = %q, want %q (the binary's default, in the unit's RuntimeDirectory)", cfg.Socket, socket)
	}
	if cfg.StateDir != stateDir {
		t.Errorf("example state_dir = %q, want %q (the binary's default, the unit's StateDirectory)", cfg.StateDir, stateDir)
	}
	if cfg.SocketGroup != "procsupervisor" {
		t.Errorf("example socket_group = %q, want procsupervisor (the group postinstall creates)", cfg.SocketGroup)
	}
	example := read(t, "supervisor.conf.example")
	for _, k := range configKeys() {
		if !strings.Contains(example, `"`+k+`":`) {
			t.Errorf("key %q missing from supervisor.conf.example: show every key with its default", k)
		}
	}
}

// TestConfigDocumented: every key has its own section in supervisor.conf.md.
func TestConfigDocumented(t *testing.T) {
	doc := read(t, "supervisor.conf.md")
	for _, k := range configKeys() {
		if !strings.Contains(doc, "### `"+k+"`") {
			t.Errorf("key %q has no section in supervisor.conf.md", k)
		}
	}
}

// TestSocketPath: the unit has the settings the daemon relies on, and the
// DaemonSet's config and probe name the socket the example configures.
func TestSocketPath(t *testing.T) {
	unit := read(t, unitFile)
	for _, want := range []string{
		"KillMode=process\n",
		"Delegate=yes\n",
		"TasksMax=infinity\n",
		"NoNewPrivileges=yes\n",
		"ExecStart=/usr/bin/supervisor run --config " + confPath + "\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("%s lacks %q", unitFile, want)
		}
	}
	ds := read(t, "kubernetes/daemonset.yaml")
	if n := strings.Count(ds, socket); n < 2 {
		t.Errorf("daemonset.yaml names %s %d times, want it in the config and the probe", socket, n)
	}
	for _, want := range []string{"path: " + filepath.Dir(socket) + "\n", "path: " + stateDir + "\n", "mountPath: " + confPath + "\n", "subPath: " + filepath.Base(confPath) + "\n"} {
		if !strings.Contains(ds, want) {
			t.Errorf("daemonset.yaml lacks %q", want)
		}
	}
}

// unitSettings returns the settings of a systemd unit file: key to values,
// in order, comments and section headers left out.
func unitSettings(t *testing.T, text string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is no setting", unitFile, line)
		}
		m[k] = append(m[k], v)
	}
	return m
}

// one returns the single value of a setting, failing when it has none or
// several.
func one(t *testing.T, m map[string][]string, key string) string {
	t.Helper()
	if len(m[key]) != 1 {
		t.Fatalf("%s: %s= set %d times, want once", unitFile, key, len(m[key]))
	}
	return m[key][0]
}

// TestUnitAgreesWithBinary parses the unit and compares it with the
// binary's own defaults for root: the socket lies in the unit's
// RuntimeDirectory, the state dir is its StateDirectory, the config given
// to ExecStart lies in its ConfigurationDirectory and is the file the
// packages install. The unit names no socket of its own (no
// SUPERVISOR_SOCKET), so root's clients and the daemon meet at the default.
func TestUnitAgreesWithBinary(t *testing.T) {
	m := unitSettings(t, read(t, unitFile))
	if got := "/run/" + one(t, m, "RuntimeDirectory"); got != filepath.Dir(socket) {
		t.Errorf("RuntimeDirectory is %s, but the binary's default socket %s is not in it", got, socket)
	}
	if one(t, m, "RuntimeDirectoryMode") != "0755" {
		t.Errorf("RuntimeDirectoryMode=%s, want 0755 (the daemon refuses a socket directory others may write to; clients must traverse it)", one(t, m, "RuntimeDirectoryMode"))
	}
	if got := "/var/lib/" + one(t, m, "StateDirectory"); got != stateDir {
		t.Errorf("StateDirectory is %s, want the binary's default %s", got, stateDir)
	}
	if got := "/etc/" + one(t, m, "ConfigurationDirectory"); got != filepath.Dir(confPath) {
		t.Errorf("ConfigurationDirectory is %s, want %s", got, filepath.Dir(confPath))
	}
	for _, key := range []string{"ExecStart", "ExecStartPre"} {
		f := strings.Fields(one(t, m, key))
		i := slices.Index(f, "--config")
		if i < 0 || i+1 >= len(f) || f[i+1] != confPath {
			t.Errorf("%s=%s: want --config %s", key, strings.Join(f, " "), confPath)
		}
	}
	for _, env := range m["Environment"] {
		if strings.Contains(env, daemon.SocketEnv+"=") {
			t.Errorf("Environment=%s: the unit must not name a socket of its own; the binary's default is the one path", env)
		}
	}
	if !strings.Contains(read(t, "nfpm.yaml"), "dst: "+confPath+"\n") {
		t.Errorf("nfpm.yaml does not install the config at %s", confPath)
	}
}

// TestPackageCoexists: the package is not named supervisor, and none of
// its paths is, or lies under, a path of Debian's supervisor package
// (supervisord) that names supervisor: not its unit, config directory,
// docs, man pages or init script. Shared directories (/usr/bin,
// /lib/systemd/system) are fine; /usr/bin/supervisor is not one of theirs.
// scripts/coexist.sh checks the same on an installed system.
func TestPackageCoexists(t *testing.T) {
	nfpm := read(t, "nfpm.yaml")
	if m := regexp.MustCompile(`(?m)^name:\s*(\S+)$`).FindStringSubmatch(nfpm); m == nil || m[1] != "procsupervisor" {
		t.Errorf("nfpm.yaml name = %v, want procsupervisor", m)
	}
	var theirs []string
	for _, line := range strings.Split(read(t, "testdata/debian-supervisor-4.2.5.paths"), "\n") {
		if line != "" && line[0] != '#' && strings.Contains(filepath.Base(line), "supervisor") {
			theirs = append(theirs, line)
		}
	}
	if len(theirs) < 5 {
		t.Fatalf("read %d paths of Debian's supervisor, want its unit, config, docs...", len(theirs))
	}
	dsts := regexp.MustCompile(`(?m)^\s+dst:\s*(\S+)$`).FindAllStringSubmatch(nfpm, -1)
	if len(dsts) < 5 {
		t.Fatalf("nfpm.yaml: %d dst: lines, want the binary, unit, config and docs", len(dsts))
	}
	for _, d := range dsts {
		for _, p := range theirs {
			if d[1] == p || strings.HasPrefix(d[1], p+"/") {
				t.Errorf("nfpm.yaml installs %s, in Debian's supervisor's %s", d[1], p)
			}
		}
	}
}

// TestCapabilitiesAgree: the DaemonSet adds exactly the unit's capabilities.
func TestCapabilitiesAgree(t *testing.T) {
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.*)$`).FindStringSubmatch(read(t, unitFile))
	if m == nil {
		t.Fatal(unitFile + ": no CapabilityBoundingSet=")
	}
	unit := map[string]bool{}
	for _, c := range strings.Fields(m[1]) {
		unit[strings.TrimPrefix(c, "CAP_")] = true
	}
	ds := read(t, "kubernetes/daemonset.yaml")
	add := ds[strings.Index(ds, "add:"):strings.Index(ds, "seccompProfile")]
	k8s := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+- ([A-Z_]+)`).FindAllStringSubmatch(add, -1) {
		k8s[m[1]] = true
	}
	if !reflect.DeepEqual(unit, k8s) {
		t.Errorf("capabilities differ: unit %v, daemonset %v", unit, k8s)
	}
}

// TestPlist: the launchd job is well-formed XML and runs `supervisor run
// --config`.
func TestPlist(t *testing.T) {
	f, err := os.Open("com.supervisor.daemon.plist")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var strs []string
	inString := false
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("plist: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			inString = v.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(v))
			}
		case xml.EndElement:
			inString = false
		}
	}
	joined := strings.Join(strs, " ")
	if !strings.Contains(joined, "com.supervisor.daemon /usr/local/bin/supervisor run --config /usr/local/etc/procsupervisor/procsupervisor.conf") {
		t.Errorf("plist strings = %q, want Label then ProgramArguments run --config", joined)
	}
}

// TestUnitVerify runs scripts/check-unit.sh (systemd-analyze verify and the
// exposure limit). It skips where systemd-analyze is missing.
func TestUnitVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		testenv.Skip(t, "systemd-analyze not installed")
	}
	out, err := exec.Command("../scripts/check-unit.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("check-unit.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
