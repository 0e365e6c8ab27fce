//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationProgramSize logs the size of each program as loaded (the
// instructions after the verifier's rewrites, and how many it processed to
// prove them safe), with and without the exec context, and checks what the
// sizes must show: the verifier drops the branches a constant turns off, so
// without the context the fork and exec programs carry none of its reads
// (they are smaller), and the exit program, which reads no context, is the
// same either way. The size limit is the verifier's own (New fails past it).
func TestIntegrationProgramSize(t *testing.T) {
	size := map[bool]map[string]int{}
	for _, ctx := range []bool{false, true} {
		s := openFor(t, ctx)
		size[ctx] = map[string]int{}
		for _, name := range []string{"fork", "exec", "exit"} {
			info, err := s.progs[name].Info()
			if err != nil {
				t.Fatal(err)
			}
			insns, err := info.Instructions()
			if err != nil {
				t.Fatal(err)
			}
			verified, ok := info.VerifiedInstructions()
			if !ok || verified < uint32(len(insns)) {
				t.Errorf("context %v: %s program: %d processed by the verifier (known %v), fewer than its %d instructions", ctx, name, verified, ok, len(insns))
			}
			size[ctx][name] = len(insns)
			t.Logf("context %v: %s program: %d instructions, %d processed by the verifier", ctx, name, len(insns), verified)
		}
		s.Close()
	}
	for _, name := range []string{"fork", "exec"} {
		if size[false][name] >= size[true][name] {
			t.Errorf("%s program: %d instructions without the context, %d with it: the context's reads were not left out", name, size[false][name], size[true][name])
		}
	}
	if size[false]["exit"] != size[true]["exit"] {
		t.Errorf("exit program: %d instructions without the context, %d with it, want the same", size[false]["exit"], size[true]["exit"])
	}
}

// openFor opens a source with or without the exec context, or skips.
func openFor(tb testing.TB, withContext bool) *Source {
	tb.Helper()
	testenv.RequireRoot(tb)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	var opts []Option
	if withContext {
		opts = append(opts, WithExecPath())
	}
	s, err := New(boot, opts...)
	if errors.Is(err, events.ErrUnavailable) {
		testenv.Skip(tb, "cannot load eBPF: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkExecObserved runs fork+exec+wait of /bin/true with a few
// arguments (then with 4 KiB of them) unobserved, watched by the source
// without the exec context, and with it, while a goroutine drains and
// decodes every event. It reports execs per second of wall time, the whole
// process's CPU per exec (the storm's parent side, the reader and the
// decoding; the children's CPU is not in it), and, from the kernel's BPF
// statistics, the exec program's own time per run.
func BenchmarkExecObserved(b *testing.B) {
	for _, argBytes := range []int{16, 4096} {
		argv := []string{"/bin/true", "-a", "-b", "c"}
		if argBytes > 16 {
			argv = []string{"/bin/true", strings.Repeat("x", argBytes)}
		}
		for _, mode := range []string{"unobserved", "bare", "context"} {
			b.Run(mode+"/args="+strconv.Itoa(argBytes), func(b *testing.B) {
				benchExec(b, mode, argv)
			})
		}
	}
}

func benchExec(b *testing.B, mode string, argv []string) {
	var s *Source
	var stats interface{ Close() error }
	if mode != "unobserved" {
		s = openFor(b, mode == "context")
		st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatalf("EnableStats: %v", err)
		}
		stats = st
		done := make(chan struct{})
		go func() {
			defer close(done)
			var ev events.Event
			for s.Read(&ev) == nil {
			}
		}()
		defer func() {
			stats.Close()
			s.Close()
			<-done
		}()
	}
	var ru0, ru1 unix.Rusage
	attr := &syscall.ProcAttr{Env: []string{}}
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	start := time.Now()
	var execStart *ebpf.ProgramStats
	if s != nil {
		execStart, _ = s.progs["exec"].Stats()
	}
	n := 0
	for b.Loop() {
		pid, err := syscall.ForkExec(argv[0], argv, attr)
		if err != nil {
			b.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			b.Fatal(err)
		}
		n++
	}
	elapsed := time.Since(start)
	if s != nil {
		// Let the reader drain what the last execs left.
		time.Sleep(50 * time.Millisecond)
	}
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(n)/elapsed.Seconds(), "execs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-us/exec")
	if s != nil {
		st, err := s.progs["exec"].Stats()
		if err == nil && execStart != nil && st.RunCount > execStart.RunCount {
			b.ReportMetric(float64((st.Runtime-execStart.Runtime).Nanoseconds())/float64(st.RunCount-execStart.RunCount), "bpf-ns/exec")
		}
	}
}
