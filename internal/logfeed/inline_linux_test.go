package logfeed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestInlineWrites: with the feed in a file written raw, the goroutine
// whose process event fills a batch writes it itself while another
// goroutine logs verdicts; every line reaches the file once, and the
// process lines keep their order.
func TestInlineWrites(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.EXT4_SUPER_MAGIC && fs.Type != unix.XFS_SUPER_MAGIC && fs.Type != unix.TMPFS_MAGIC {
		testenv.Skip(t, "temporary directory on filesystem %#x, which quietfile does not write raw here", fs.Type)
	}
	path := filepath.Join(dir, "feed.log")
	l, err := New(Config{Output: "file:" + path, BufferLines: 4096, ProcessEvents: AllKinds})
	if err != nil {
		t.Fatal(err)
	}
	const procs, verdicts = 12000, 300
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range verdicts {
			l.Verdict(verdict.Verdict{Pid: int32(1_000_000 + i), Result: verdict.Gone, Reason: "exit observed", Mechanism: "ebpf"})
		}
	})
	ev := sampleExec()
	for i := range procs {
		ev.Pid = int32(i + 1)
		l.Event(&ev)
	}
	wg.Wait()
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := l.q.inlined.Load(); n == 0 {
		t.Fatal("no batch was written by the goroutine that filled it")
	}
	if st := l.Stats(); st.Written != procs+verdicts || st.Dropped != 0 {
		t.Fatalf("Stats %+v, want %d written and none dropped", st, procs+verdicts)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var next int64 = 1
	seen := map[int64]bool{}
	for _, m := range decodeLines(t, b) {
		pid, _ := getInt(m, "process.pid")
		if getString(m, "event.action") != ActionProcessExec {
			if seen[pid] {
				t.Fatalf("verdict for %d twice", pid)
			}
			seen[pid] = true
			continue
		}
		if pid != next {
			t.Fatalf("process line of pid %d where %d was next", pid, next)
		}
		next++
	}
	if next != procs+1 || len(seen) != verdicts {
		t.Fatalf("%d process lines and %d verdicts in the file, want %d and %d", next-1, len(seen), procs, verdicts)
	}
}

// TestNoInlineWithoutRawFile: a sink that can wait (here a Writer) is
// never written by the goroutine that filled a batch.
func TestNoInlineWithoutRawFile(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	l, err := New(Config{Writer: lockedWriter{&mu, &buf}, BufferLines: 64, ProcessEvents: AllKinds})
	if err != nil {
		t.Fatal(err)
	}
	ev := sampleExec()
	for i := range 1000 {
		ev.Pid = int32(i + 1)
		l.Event(&ev)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := l.q.inlined.Load(); n != 0 {
		t.Fatalf("%d batches written inline to a Writer", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
