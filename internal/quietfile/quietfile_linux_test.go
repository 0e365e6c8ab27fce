package quietfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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

func TestOnlyLocalRegular(t *testing.T) {
	f, _ := testFile(t)
	if New(f) == nil {
		t.Error("a regular file on a local filesystem: no Writer")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if New(null) != nil {
		t.Error("/dev/null: got a Writer, want none (not a regular file)")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if New(w) != nil {
		t.Error("a pipe: got a Writer, want none (a write can wait for its reader)")
	}
	// /proc is no local disk filesystem: a regular file there is refused.
	p, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if New(p) != nil {
		t.Error("/proc/self/status: got a Writer, want none (procfs)")
	}
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
			if tc.slow {
				defer func(d time.Duration) { slowCall = d }(slowCall)
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
