package quietfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// testFile opens a new file in a temporary directory for appending,
// and skips when that directory is on no filesystem Writer writes raw
// (the test then proves nothing here).
func testFile(t *testing.T) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "feed.json")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(localFilesystems[:], int64(fs.Type)) {
		testenv.Skip(t, "temporary directory on filesystem %#x, not a local one Writer knows", fs.Type)
	}
	return f, path
}

// TestKinds: which files get a Writer, and which kind.
func TestKinds(t *testing.T) {
	f, _ := testFile(t)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// /proc is no local disk filesystem: a regular file there is refused.
	p, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, tc := range []struct {
		name   string
		f      *os.File
		writer bool
		nowait bool
	}{
		{"a regular file on a local filesystem", f, true, false},
		{"/dev/null", null, true, true},
		{"a pipe", w, true, true},
		{"/proc/self/status (procfs)", p, false, false},
		{"a directory", dir, false, false},
	} {
		q := New(tc.f)
		if (q != nil) != tc.writer {
			t.Errorf("%s: got a Writer %v, want %v", tc.name, q != nil, tc.writer)
			continue
		}
		if q != nil && q.nowait != tc.nowait {
			t.Errorf("%s: written with RWF_NOWAIT %v, want %v", tc.name, q.nowait, tc.nowait)
		}
	}
}

// TestNowait writes to pipes, sockets, a terminal and /dev/null: every
// byte arrives in order, raw while there is room, through the runtime
// (which waits for the reader) when there is none; a file the kernel
// cannot write without waiting (RWF_NOWAIT refused) is written through
// the runtime from then on; a broken pipe fails as the runtime says.
func TestNowait(t *testing.T) {
	stream, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	dgram, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	files := func(fds [2]int, name string) (*os.File, *os.File) {
		a, b := os.NewFile(uintptr(fds[0]), name+" writer"), os.NewFile(uintptr(fds[1]), name+" reader")
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	sw, sr := files(stream, "stream socket")
	dw, dr := files(dgram, "datagram socket")
	pr, pw := blockingPipe(t)
	// os.Pipe's ends are non-blocking, in the runtime's poller: written
	// with RWF_NOWAIT, the rest through the runtime.
	npr, npw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { npr.Close(); npw.Close() })
	master, tty, _ := testenv.Pty(t)

	for _, tc := range []struct {
		name   string
		w, r   *os.File
		sizes  []int
		dgram  bool // each write arrives as one message
		slow   bool // the reader starts late: the buffer fills
		anyRaw bool // the kernel may refuse RWF_NOWAIT (a terminal)
		pipe   bool // a blocking pipe: opened anew, every byte raw
	}{
		{name: "pipe", w: pw, r: pr, sizes: []int{1, 4096, 3 << 20, 100}, slow: true, pipe: true},
		{name: "non-blocking pipe", w: npw, r: npr, sizes: []int{1, 4096, 3 << 20, 100}, slow: true},
		{name: "stream socket", w: sw, r: sr, sizes: []int{10, 3 << 20, 7}, slow: true},
		{name: "datagram socket", w: dw, r: dr, sizes: []int{100, 2000, 60000}, dgram: true},
		{name: "terminal", w: tty, r: master, sizes: []int{10, 300}, anyRaw: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := New(tc.w)
			if q == nil || !q.nowait {
				t.Fatalf("no RWF_NOWAIT Writer for a %s", tc.name)
			}
			var want []byte
			for _, n := range tc.sizes {
				want = append(want, pattern(n)...)
			}
			got := make(chan []byte, 1)
			start := make(chan struct{})
			go func() {
				<-start
				var b []byte
				buf := make([]byte, 1<<16)
				for len(b) < len(want) {
					n, err := tc.r.Read(buf)
					if err != nil {
						break
					}
					if tc.dgram && n != tc.sizes[0] && n != tc.sizes[1] && n != tc.sizes[2] {
						t.Errorf("a datagram of %d bytes: not one write", n)
					}
					b = append(b, buf[:n]...)
				}
				got <- b
			}()
			if !tc.slow {
				close(start)
			}
			done := make(chan error, 1)
			go func() {
				for _, n := range tc.sizes {
					m, err := q.Write(pattern(n))
					if err == nil && m != n {
						err = fmt.Errorf("wrote %d of %d bytes", m, n)
					}
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			if tc.slow {
				time.Sleep(50 * time.Millisecond) // let the writer fill the buffer
				close(start)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("read %d bytes, not the %d written in order", len(b), len(want))
			}
			t.Logf("%d of %d bytes raw, RWF_NOWAIT refused: %v", q.raw, len(want), q.noRaw)
			switch {
			case tc.anyRaw:
				if q.raw == 0 && !q.noRaw {
					t.Errorf("nothing written raw, yet RWF_NOWAIT was not refused")
				}
			case q.raw == 0 || q.noRaw:
				t.Errorf("%d bytes written raw (refused: %v): want the writes raw", q.raw, q.noRaw)
			case tc.pipe && (q.pipe == nil || q.raw != int64(len(want))):
				t.Errorf("pipe opened anew: %v, %d of %d bytes raw: want all, waiting for room in the poller", q.pipe != nil, q.raw, len(want))
			case !tc.pipe && tc.slow && q.raw >= int64(len(want)):
				t.Errorf("all %d bytes written raw: the full buffer never sent a write through the runtime", q.raw)
			}
			if q.pipe != nil {
				if fl, err := unix.FcntlInt(tc.w.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
					t.Errorf("the pipe's own description: flags %#x, %v; want it left blocking", fl, err)
				}
			}
			if err := q.Close(); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("close while waiting for room", func(t *testing.T) {
		_, w := blockingPipe(t)
		q := New(w)
		if q == nil || q.pipe == nil {
			t.Fatal("no Writer with the pipe opened anew")
		}
		done := make(chan error, 1)
		go func() {
			_, err := q.Write(pattern(1 << 20)) // never read: it waits for room
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("Write returned %v with nothing read", err)
		case <-time.After(100 * time.Millisecond):
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, os.ErrClosed) {
				t.Fatalf("Write after Close returned %v, want os.ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Write still waiting 10 s after Close")
		}
	})

	t.Run("broken pipe", func(t *testing.T) {
		r, w := blockingPipe(t)
		q := New(w)
		if q == nil || q.pipe == nil {
			t.Fatal("no Writer with the pipe opened anew")
		}
		r.Close() // the reader goes after the Writer was made
		if n, err := q.Write([]byte("x\n")); n != 0 || !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("Write to a pipe without a reader = %d, %v; want 0, EPIPE", n, err)
		}
		q.Close()
	})
}

// blockingPipe returns a pipe whose ends are blocking, as a process's
// stdout is (os.Pipe's are not).
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(fds[0]), "pipe reader"), os.NewFile(uintptr(fds[1]), "pipe writer")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// pattern returns n bytes that tell their offsets apart.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%23)
	}
	return b
}

func TestWritesAll(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		slow  bool // every call counts as slow
		slept bool // every call sleeps in the kernel (a fake count)
		loud  bool // the writes after go through the runtime
	}{
		{name: "small", sizes: []int{1, 100, 4096}},
		{name: "over a chunk", sizes: []int{Chunk + 1, 3*Chunk + 17}},
		{name: "slow and slept", sizes: []int{3*Chunk + 5, 1000}, slow: true, slept: true, loud: true},
		{name: "slow awake", sizes: []int{3*Chunk + 5, 1000}, slow: true},
		{name: "slept fast", sizes: []int{3*Chunk + 5, 1000}, slept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every call is slow, or none is: a real write on a busy host
			// (under -race) may take longer than the real threshold.
			defer func(d time.Duration) { slowCall = d }(slowCall)
			slowCall = time.Hour
			if tc.slow {
				slowCall = -1
			}
			defer func(f func() int64) { threadSleeps = f }(threadSleeps)
			var sleeps int64
			threadSleeps = func() int64 {
				if tc.slept {
					sleeps++ // the count moves between any two looks
				}
				return sleeps
			}
			f, path := testFile(t)
			q := New(f)
			if q == nil {
				t.Fatal("no Writer")
			}
			var want []byte
			for _, n := range tc.sizes {
				p := pattern(n)
				got, err := q.Write(p)
				if err != nil || got != n {
					t.Fatalf("Write(%d bytes) = %d, %v", n, got, err)
				}
				want = append(want, p...)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("file holds %d bytes, not the %d written", len(b), len(want))
			}
			// Only a call that was slow and slept sends the next writes
			// through the runtime.
			if loud := time.Now().Before(q.loudUntil); loud != tc.loud {
				t.Errorf("writing through the runtime now: %v, want %v", loud, tc.loud)
			}
		})
	}
}

// TestThreadSleeps: the real count goes up when the thread sleeps in the
// kernel.
func TestThreadSleeps(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadSleeps()
	ts := unix.Timespec{Nsec: int64(time.Millisecond)}
	if err := unix.Nanosleep(&ts, nil); err != nil {
		t.Fatal(err)
	}
	if after := threadSleeps(); after <= before {
		t.Fatalf("voluntary switches %d before a 1 ms nanosleep, %d after", before, after)
	}
}

func TestClosed(t *testing.T) {
	f, _ := testFile(t)
	q := New(f)
	if q == nil {
		t.Fatal("no Writer")
	}
	f.Close()
	if n, err := q.Write([]byte("x\n")); n != 0 || !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close = %d, %v; want 0, os.ErrClosed", n, err)
	}
}

// TestFor: `events --json > FILE` and the feed's stdout get a Writer for
// a local file and a pipe; a buffer is written as it is.
func TestFor(t *testing.T) {
	f, _ := testFile(t)
	if _, ok := For(f).(*Writer); !ok {
		t.Errorf("a regular file on a local filesystem: %T, want *Writer", For(f))
	}
	_, w := blockingPipe(t)
	q, ok := For(w).(*Writer)
	if !ok {
		t.Fatalf("a pipe: %T, want *Writer", For(w))
	}
	q.Close()
	var b bytes.Buffer
	if got := For(&b); got != &b {
		t.Errorf("a buffer: %T, want itself", got)
	}
}
