package fallback

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchProcsEnv names the variable that makes the snapshot benchmarks spawn
// that many idle processes (sleep) first, to measure at a given table size:
//
//	FALLBACK_BENCH_PROCS=10000 go test -run '^$' -bench Snapshot ./internal/fallback/
const BenchProcsEnv = "FALLBACK_BENCH_PROCS"

// spawnIdle starts n `sleep` processes, children of one shell in its own
// process group, that live until the benchmark ends.
func spawnIdle(b *testing.B, n int) {
	b.Helper()
	sh := exec.Command("sh", "-c", `i=0; while [ $i -lt $1 ]; do sleep 3600 & i=$((i+1)); done; echo started; wait`, "spawn", strconv.Itoa(n))
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		sh.Wait()
	})
	line := make([]byte, 8)
	if _, err := out.Read(line); err != nil {
		b.Fatalf("spawning %d idle processes: %v", n, err)
	}
}

func benchSnapshot(b *testing.B, s Snapshotter) {
	if v := os.Getenv(BenchProcsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("%s=%q: %v", BenchProcsEnv, v, err)
		}
		spawnIdle(b, n)
	}
	ctx := context.Background()
	var entries int
	var before, beforeKids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &beforeKids)
	b.ResetTimer()
	for b.Loop() {
		snap, err := s.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		entries = len(snap.Entries)
	}
	b.StopTimer()
	var after, afterKids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &afterKids)
	cpu := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	// CPU of this process (parse, scan) plus of the ps children it reaped.
	used := cpu(after) - cpu(before) + cpu(afterKids) - cpu(beforeKids)
	b.ReportMetric(float64(used.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(entries), "procs")
}

func BenchmarkSnapshotProc(b *testing.B) { benchSnapshot(b, NewProc("/proc")) }

// BenchmarkSnapshotPS uses a long timeout: at 10,000 processes on a busy
// 2-core machine one ps run can exceed the default.
func BenchmarkSnapshotPS(b *testing.B) { benchSnapshot(b, NewPS(PSOptions{Timeout: time.Minute})) }
