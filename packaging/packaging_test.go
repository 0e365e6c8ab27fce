// Package packaging holds the service files, the example configuration and
// the nfpm config; it has no Go code. Its tests keep those files in step
// with the daemon: the example config must load and validate with the
// daemon's own parser, every config key must be documented, the socket path
// must agree across the unit, the config and the manifests, and the unit
// must pass systemd-analyze verify where systemd-analyze exists.
package packaging

import (
	"encoding/xml"
	"errors"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"io"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/daemon"
)

const socket = "/run/supervisor/supervisor.sock"

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
	if err := daemon.LoadFile("supervisor.conf.example", &cfg); err != nil {
		t.Fatalf("LoadFile(supervisor.conf.example) = %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(example) = %v", err)
	}
	if cfg.Socket != socket {
		t.Errorf("example socket = %q, want %q (the unit's RuntimeDirectory)", cfg.Socket, socket)
	}
	if cfg.StateDir != "/var/lib/supervisor" {
		t.Errorf("example state_dir = %q, want /var/lib/supervisor (the unit's StateDirectory)", cfg.StateDir)
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

// TestSocketPath: the unit, the launchd job's environment and the
// DaemonSet's probe all name the socket the example configures.
func TestSocketPath(t *testing.T) {
	unit := read(t, "supervisor.service")
	for _, want := range []string{
		"Environment=SUPERVISOR_SOCKET=" + socket,
		"RuntimeDirectory=supervisor\n",
		"StateDirectory=supervisor\n",
		"KillMode=process\n",
		"Delegate=yes\n",
		"NoNewPrivileges=yes\n",
		"ExecStart=/usr/bin/supervisor run --config /etc/supervisor/supervisor.conf\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("supervisor.service lacks %q", want)
		}
	}
	ds := read(t, "kubernetes/daemonset.yaml")
	if n := strings.Count(ds, socket); n < 3 {
		t.Errorf("daemonset.yaml names %s %d times, want it in the config, env and probe", socket, n)
	}
}

// TestCapabilitiesAgree: the DaemonSet adds exactly the unit's capabilities.
func TestCapabilitiesAgree(t *testing.T) {
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.*)$`).FindStringSubmatch(read(t, "supervisor.service"))
	if m == nil {
		t.Fatal("supervisor.service: no CapabilityBoundingSet=")
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
	if !strings.Contains(joined, "com.supervisor.daemon /usr/local/bin/supervisor run --config /usr/local/etc/supervisor/supervisor.conf") {
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
