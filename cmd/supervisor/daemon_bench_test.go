package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
)

// reportPercentiles adds p50 and p99 in microseconds to a benchmark.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkVerify compares a verify through the daemon's API with what a
// pid-file tool does, `ps -o lstart= -p PID`, in the same run.
func BenchmarkVerify(b *testing.B) {
	testenv.RequireRoot(b)
	state, sock := newDirs(b)
	d := startDaemon(b, state, sock)
	target := testenv.Start(b, "sleep", "1000")
	pid := int32(target.Process.Pid)
	tok := tokenOfTB(b, int(pid))
	tt, err := token.Parse(tok)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("api", func(b *testing.B) {
		c := api.NewClient(sock)
		defer c.Close()
		ds := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			v, err := c.Verify(context.Background(), pid, tt)
			ds = append(ds, time.Since(t0))
			if err != nil || v.Result.String() != "OWNED" {
				b.Fatalf("verify = %v, %v", v, err)
			}
		}
		reportPercentiles(b, ds)
	})
	// A connection per request, as each CLI run makes: the daemon reads
	// the peer's credentials, user namespace, pid namespace and root.
	b.Run("api-connection", func(b *testing.B) {
		ds := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			c := api.NewClient(sock)
			v, err := c.Verify(context.Background(), pid, tt)
			c.Close()
			ds = append(ds, time.Since(t0))
			if err != nil || v.Result.String() != "OWNED" {
				b.Fatalf("verify = %v, %v", v, err)
			}
		}
		reportPercentiles(b, ds)
	})
	b.Run("ps-lstart", func(b *testing.B) {
		ds := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			out, err := exec.Command("ps", "-o", "lstart=", "-p", strconv.Itoa(int(pid))).Output()
			ds = append(ds, time.Since(t0))
			if err != nil || len(strings.TrimSpace(string(out))) == 0 {
				b.Fatalf("ps: %q %v", out, err)
			}
		}
		reportPercentiles(b, ds)
	})
	_ = d
}

// BenchmarkLaunch measures a launch through the API until its answer
// carries the token, and then the daemon's idle RSS.
func BenchmarkLaunch(b *testing.B) {
	testenv.RequireRoot(b)
	state, sock := newDirs(b)
	d := startDaemon(b, state, sock)
	c := api.NewClient(sock)
	defer c.Close()
	ds := make([]time.Duration, 0, b.N)
	var cls []api.Claim
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cl, err := c.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "1000"}, Cwd: "/"})
		ds = append(ds, time.Since(t0))
		if err != nil || cl.Token.IsZero() {
			b.Fatalf("launch = %+v, %v", cl, err)
		}
		cls = append(cls, cl)
	}
	b.StopTimer()
	reportPercentiles(b, ds)
	zero := api.Duration(0)
	for _, cl := range cls {
		c.Release(context.Background(), cl.ID, &api.ReleaseRequest{Grace: &zero})
	}
	// Idle: every released process gone (killed and reaped by the daemon).
	testenv.Eventually(b, 30*time.Second, func() bool {
		return !slices.ContainsFunc(cls, func(cl api.Claim) bool { return owned(cl.Pid, cl.Token) })
	}, "released processes still alive")
	if rss := rssKiB(d.cmd.Process.Pid); rss > 0 {
		b.ReportMetric(float64(rss), "daemon-rss-KiB")
	}
}

func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	return 0
}

func tokenOfTB(tb testing.TB, pid int) string {
	out, err := exec.Command(binary(tb), "token", strconv.Itoa(pid)).Output()
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestIntegrationDaemonWallClock: a grant past its wall clock is torn down.
func TestIntegrationDaemonWallClock(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	g := d.launch(t, "--wall-clock", "1s", "--", "sleep", "1000")
	j := d.launch(t, "--detach", "--wall-clock", "1s", "--", "sleep", "1000")
	keep := d.launch(t, "--", "sleep", "1000")
	if !testenv.Poll(15*time.Second, func() bool { return d.claim(t, g.ID).State == store.Released }) {
		t.Errorf("grant past its wall clock: %s, want released", d.claim(t, g.ID).State)
	}
	if !testenv.Poll(15*time.Second, func() bool { return d.claim(t, j.ID).State == store.Exited }) {
		t.Errorf("job past its maximum runtime: %s, want exited", d.claim(t, j.ID).State)
	}
	if got := d.claim(t, j.ID); got.ExitSignal == 0 && got.ExitCode == nil {
		t.Errorf("job killed by its wall clock has no exit status recorded: %+v", got)
	}
	if owned(g.Pid, g.Token) || owned(j.Pid, j.Token) {
		t.Error("a process past its wall clock is still alive")
	}
	if !owned(keep.Pid, keep.Token) {
		t.Error("a grant without a wall clock was torn down")
	}
}
