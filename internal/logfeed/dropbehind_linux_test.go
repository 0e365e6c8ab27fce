package logfeed

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestFileDropBehind writes 24 windows of lines to a real file and checks
// with mincore(2) that the page cache keeps the end of the file and
// nothing a window before the last advice, and that every line is in the
// file. The file is synced after each write so that the pages are clean
// when the next advice covers them (left to the kernel, writeback takes
// its time and some pages stay for longer: best effort).
func TestFileDropBehind(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		testenv.Skip(t, "%s is on tmpfs, whose pages fadvise cannot drop", dir)
	}
	defer func(w int64) { cacheWindow = w }(cacheWindow)
	cacheWindow = 1 << 20

	path := filepath.Join(dir, "feed.log")
	fo, err := openFile(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := newStreamSink(fo.writer(), fo)
	sync, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sync.Close()

	line := bytes.Repeat([]byte{'x'}, streamBatch)
	line[len(line)-1] = '\n'
	const lines = 24 * 16 // 24 windows of 64 KiB lines
	var want bytes.Buffer
	for i := range lines {
		copy(line, []byte{byte('a' + i%26)}) // lines differ: a lost or repeated one shows
		want.Write(line)
		if _, lost, err := s.writeRun(line, 1); err != nil || lost != 0 {
			t.Fatalf("line %d: lost %d, %v", i, lost, err)
		}
		if err := unix.Fdatasync(int(sync.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	if _, lost, err := s.flush(); err != nil || lost != 0 {
		t.Fatalf("flush: lost %d, %v", lost, err)
	}
	size, dropped := fo.size, fo.dropped
	if size != int64(want.Len()) || dropped < size-3*cacheWindow {
		t.Fatalf("file size %d (wrote %d), advice up to %d: want it within 3 windows of the end", size, want.Len(), dropped)
	}

	mem, err := unix.Mmap(int(sync.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(unix.Getpagesize())
	vec := make([]byte, (size+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0])))
	unix.Munmap(mem)
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	resident := func(from, to int64) (n int) {
		for _, v := range vec[from/page : to/page] {
			n += int(v & 1)
		}
		return n
	}
	if n := resident(0, dropped-cacheWindow); n != 0 {
		t.Errorf("%d pages of the first %d bytes are still cached, advised away twice after writeback", n, dropped-cacheWindow)
	}
	if n := resident(size-cacheWindow, size); n == 0 {
		t.Errorf("none of the last window's pages is cached: the end of the file, which a shipper tails, was dropped")
	}

	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the file's %d bytes differ from the %d written", len(got), want.Len())
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
}
