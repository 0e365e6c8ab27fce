package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationClientsAskTheDaemon: verify, kill and tree are answered by
// a running daemon and say so; a claim the daemon does not hold is torn
// down locally.
func TestIntegrationClientsAskTheDaemon(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	c := d.launch(t, "--", "sh", "-c", "sleep 1000 & wait")
	pid := strconv.Itoa(int(c.Pid))

	code, out, errs := d.run(t, nil, "verify", pid, c.Token.String(), "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("verify = %d %q %s (%v)", code, out, errs, err)
	}
	if v["verdict"] != "OWNED" || !strings.HasPrefix(v["mechanism"].(string), "daemon:") {
		t.Errorf("verify = %v, want OWNED answered by the daemon", v)
	}

	code, out, _ = d.run(t, nil, "tree", pid, "--json")
	if code != 0 || !strings.Contains(out, `"mechanism": "daemon"`) || !strings.Contains(out, `"comm": "sleep"`) {
		t.Errorf("tree = %d %s, want the daemon's tree with the sleep child", code, out)
	}

	code, out, errs = d.run(t, nil, "kill", pid, c.Token.String(), "--grace", "1s", "--json")
	var o map[string]any
	if err := json.Unmarshal([]byte(out), &o); err != nil || code != 0 || o["dead"] != true {
		t.Fatalf("kill = %d %q %s (%v), want dead", code, out, errs, err)
	}
	if !strings.HasPrefix(o["mechanism"].(string), "daemon:") {
		t.Errorf("kill mechanism = %v, want the daemon's teardown", o["mechanism"])
	}

	// Not the daemon's: the teardown runs locally, and says so.
	stray := testenv.Start(t, "sleep", "1000")
	tok := strings.TrimSpace(func() string { _, out, _ := d.run(t, nil, "token", strconv.Itoa(stray.Process.Pid)); return out }())
	code, out, errs = d.run(t, nil, "kill", strconv.Itoa(stray.Process.Pid), tok, "--grace", "1s", "--json")
	if err := json.Unmarshal([]byte(out), &o); err != nil || code != 0 || o["dead"] != true ||
		!strings.HasPrefix(o["mechanism"].(string), "local:") {
		t.Errorf("kill of an unheld process = %d %q %s, want dead, torn down locally", code, out, errs)
	}
	if !testenv.Poll(5*time.Second, func() bool { return !owned(int32(stray.Process.Pid), tok) }) {
		t.Error("unheld process still alive")
	}
}

// TestIntegrationDaemonMetrics scrapes the daemon's Prometheus endpoint
// after a launch and a release: the counters moved with what happened.
func TestIntegrationDaemonMetrics(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	msock := filepath.Join(filepath.Dir(sock), "metrics.sock")
	d := startDaemon(t, state, sock, "--metrics-listen", "unix:"+msock)
	c := d.launch(t, "--", "sleep", "1000")
	if code, _, errs := d.run(t, nil, "release", c.ID, "--grace", "1s"); code != 0 {
		t.Fatalf("release: %d %s", code, errs)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", msock)
	}}}
	resp, err := hc.Get("http://supervisor/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	value := func(series string) float64 {
		for _, line := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(line, series+" "); ok {
				v, _ := strconv.ParseFloat(rest, 64)
				return v
			}
		}
		t.Errorf("no series %s in the exposition", series)
		return 0
	}
	if v := value(`supervisor_claims{kind="grant",state="released"}`); v != 1 {
		t.Errorf("released grants = %v, want 1", v)
	}
	if v := value(`supervisor_teardowns_total{outcome="terminated"}`); v < 1 {
		t.Errorf("terminated teardowns = %v, want at least 1", v)
	}
	if v := value(`supervisor_signals_total{signal="SIGTERM"}`); v < 1 {
		t.Errorf("SIGTERMs = %v, want at least 1", v)
	}
	if v := value(`supervisor_verdicts_total{result="OWNED"}`); v < 1 {
		t.Errorf("OWNED verdicts = %v, want at least 1", v)
	}
	if !strings.Contains(text, `supervisor_events_total{kind="fork",mechanism="ebpf"}`) || !strings.Contains(text, "supervisor_build_info{") {
		t.Errorf("exposition lacks event counters or build info:\n%s", text)
	}
	if v := value(`supervisor_graph_nodes{state="live"}`); v < 1 {
		t.Errorf("live graph nodes = %v", v)
	}
}
