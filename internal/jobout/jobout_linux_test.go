package jobout

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// block is the file system's block (ext4 and tmpfs here: 4 KiB), the
// alignment of what Bound frees.
const block = 4096

// pattern is n bytes that say their own offset, so that a byte read back
// can be checked to be the one written there.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/4096) ^ byte(i)
	}
	return b
}

// held is how many bytes of the file at path the disk holds.
func held(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestBound: a file past its bound keeps its size and its last max bytes
// at their offsets, and the disk holds about max of it; DataFrom says
// where the kept bytes start. A file within the bound and a symbolic link
// are left alone; a file hard-linked elsewhere is bounded too.
func TestBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.out")
	const size, max = 8 << 20, 1 << 20
	data := pattern(size)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Bound(path, max)
	if err != nil {
		t.Fatal(err)
	}
	upTo := r.UpTo
	if want := int64(size-max) &^ (block - 1); upTo != want {
		t.Errorf("Bound dropped up to %d, want %d", upTo, want)
	}
	if h := held(t, path); h > max+block {
		t.Errorf("the disk holds %d bytes of the file after Bound, want at most %d", h, max+block)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if st.Size() != size {
		t.Errorf("size %d after Bound, want %d kept", st.Size(), size)
	}
	if from := DataFrom(f, 0, size); from != upTo {
		t.Errorf("DataFrom(0) = %d, want %d", from, upTo)
	}
	if from := DataFrom(f, size-10, size); from != size-10 {
		t.Errorf("DataFrom(size-10) = %d, want it as asked", from)
	}
	tail := make([]byte, size-upTo)
	if _, err := f.ReadAt(tail, upTo); err != nil || !bytes.Equal(tail, data[upTo:]) {
		t.Errorf("the kept bytes are not the last ones written (%v)", err)
	}
	// Within its bound: nothing.
	if r, err := Bound(path, 4<<20); err != nil || r != (Result{}) {
		t.Errorf("Bound of a file within its bound = %+v, %v; want nothing", r, err)
	}
	// Blocks allocated past its end (fallocate --keep-size: 8 bytes long,
	// 64 MiB held): freed, its bytes kept.
	pre := filepath.Join(dir, "p.out")
	pf, err := os.OpenFile(pre, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pf.Write([]byte("8 bytes\n")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(pf.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, 0, 64<<20); err != nil {
		t.Fatal(err)
	}
	pf.Close()
	if h := held(t, pre); h < 64<<20 {
		t.Fatalf("fallocate --keep-size held %d bytes, want 64 MiB", h)
	}
	if _, err := Bound(pre, max); err != nil || held(t, pre) > max+Slack+block {
		t.Errorf("Bound of a file holding 64 MiB past its 8 bytes = %v, holding %d; want them freed", err, held(t, pre))
	}
	if b, _ := os.ReadFile(pre); string(b) != "8 bytes\n" {
		t.Errorf("the file's bytes after freeing past its end: %q", b)
	}
	// Hard-linked elsewhere (its user's escape from the bound): taken
	// back from its user (TestBoundEscaped) and bounded all the same.
	linked := filepath.Join(dir, "l.out")
	if err := os.WriteFile(linked, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(linked, filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if r, err := Bound(linked, max); err != nil || r.UpTo == 0 || !r.Escaped || held(t, linked) > max+block {
		t.Errorf("Bound of a hard-linked file = %+v, %v, holding %d; want it escaped and bounded", r, err, held(t, linked))
	}
	// A symbolic link to a big file: not followed.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "s.out")); err != nil {
		t.Fatal(err)
	}
	if r, _ := Bound(filepath.Join(dir, "s.out"), max); r != (Result{}) || held(t, target) < size {
		t.Errorf("Bound through a symbolic link = %+v of its target", r)
	}
}

// TestWatch: a file in the watched directory written far past its bound,
// as a job writes its output (O_APPEND, in chunks), is held to about its
// bound, its last bytes intact, even with its writer's last burst within
// the watch's gap; a file not named with the suffix is left alone.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const bound = 1 << 20
	reported := make(chan int64, 1024)
	if err := Watch(ctx, dir, ".out", bound, Reports{Bounded: func(_ string, upTo int64) {
		select {
		case reported <- upTo:
		default:
		}
	}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "j.out")
	other := filepath.Join(dir, "other")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(32 << 20)
	for off := 0; off < len(data); off += 64 << 10 {
		if _, err := f.Write(data[off : off+64<<10]); err != nil {
			t.Fatal(err)
		}
	}
	// Held open, as by a job still running: its last write is looked at
	// without a close to tell of it.
	defer f.Close()
	if err := os.WriteFile(other, data[:4<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return held(t, path) <= bound+Slack+block },
		"the disk holds %d bytes of a file bounded to %d", held(t, path), bound)
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	from := DataFrom(r, 0, int64(len(data)))
	kept := make([]byte, int64(len(data))-from)
	if _, err := r.ReadAt(kept, from); err != nil || !bytes.Equal(kept, data[from:]) || from == 0 {
		t.Errorf("kept from %d: not the last bytes written (%v)", from, err)
	}
	if len(reported) == 0 {
		t.Error("no file was reported bounded")
	}
	if held(t, other) < 4<<20 {
		t.Errorf("a file without the suffix was bounded")
	}
}

// TestWatchMapped: a file written through a shared mapping, which tells
// inotify nothing after its truncate, is bounded at the next sweep.
func TestWatchMapped(t *testing.T) {
	const bound, size = 1 << 20, 16 << 20
	dir := watched(t, bound, 200*time.Millisecond)
	path := filepath.Join(dir, "m.out")
	f, data := writeMapped(t, path, size)
	testenv.Eventually(t, 5*time.Second, func() bool { return held(t, path) <= bound+Slack+block },
		"a file written through a mapping holds %d bytes, bounded to %d", held(t, path), bound)
	tail := make([]byte, bound/2)
	if _, err := f.ReadAt(tail, size-bound/2); err != nil || !bytes.Equal(tail, data[size-bound/2:]) {
		t.Errorf("the last bytes written through the mapping are not kept (%v)", err)
	}
}

// TestWatchBusy: a file written through a mapping (no events) is bounded
// at the sweep while another job keeps the directory busy with writes
// every few milliseconds; the events of one pushed the sweep, and every
// pending look, out for as long as they came.
func TestWatchBusy(t *testing.T) {
	const bound, size = 1 << 20, 16 << 20
	dir := watched(t, bound, 300*time.Millisecond)
	busy, err := os.OpenFile(filepath.Join(dir, "busy.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
				busy.Write([]byte("tick\n"))
			}
		}
	}()
	path := filepath.Join(dir, "m.out")
	writeMapped(t, path, size)
	testenv.Eventually(t, 5*time.Second, func() bool { return held(t, path) <= bound+Slack+block },
		"a file written through a mapping, beside a busy one, holds %d bytes, bounded to %d", held(t, path), bound)
}

// writeMapped makes a file of size bytes at path and writes them through a
// shared mapping, after its truncate's event has been looked at: inotify
// hears nothing of the writes. It returns the file, open, and the bytes.
func writeMapped(t *testing.T, path string, size int) (*os.File, []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(size)
	copy(m, data)
	syscall.Munmap(m)
	return f, data
}

// watched watches a new directory, its files bounded to bound and swept
// every sweep, until the test ends, and returns it.
func watched(t *testing.T, bound int64, sweep time.Duration) string {
	t.Helper()
	defer func(d time.Duration) { sweepEvery = d }(sweepEvery)
	sweepEvery = sweep // read once, by Watch
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := Watch(ctx, dir, ".out", bound, Reports{}); err != nil {
		t.Fatal(err)
	}
	return dir
}
