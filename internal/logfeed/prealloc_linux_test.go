package logfeed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// reserveDir returns a temporary directory on a filesystem where the feed
// reserves its file's blocks, and skips (fails in CI) when there is none.
func reserveDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.EXT4_SUPER_MAGIC && fs.Type != unix.XFS_SUPER_MAGIC {
		testenv.Skip(t, "temporary directory on filesystem %#x, not ext4 or XFS", fs.Type)
	}
	return dir
}

// allocated returns a file's size and the bytes of blocks allocated to it.
func allocated(t *testing.T, path string) (size, blocks int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestFileReserves: the feed's file has blocks allocated ahead of its
// lines, while its size, and so what a reader sees, is only the lines.
func TestFileReserves(t *testing.T) {
	path := filepath.Join(reserveDir(t), "feed.log")
	l, err := New(Config{Output: "file:" + path, BufferLines: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		l.Verdict(verdict.Verdict{Pid: int32(i + 1), Result: verdict.Gone, Reason: "exit observed", Mechanism: "netlink"})
	}
	flush(t, l)
	size, blocks := allocated(t, path)
	if blocks < size+reserveStep/2 {
		t.Errorf("%d bytes of blocks for %d bytes of lines, want about %d more allocated ahead", blocks, size, reserveStep)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != size || bytes.IndexByte(b, 0) >= 0 {
		t.Fatalf("read %d bytes (a NUL at %d) from a file of %d", len(b), bytes.IndexByte(b, 0), size)
	}
	if lines := decodeLines(t, b); len(lines) != n {
		t.Errorf("%d lines, want %d", len(lines), n)
	}
}

// TestFileReservesNotPastRotation: a rotated file never has more blocks
// than its rotation size (rounded to a block): what was reserved ahead is
// what its lines filled.
func TestFileReservesNotPastRotation(t *testing.T) {
	path := filepath.Join(reserveDir(t), "feed.log")
	const max = 64 << 10
	l, err := New(Config{Output: "file:" + path, MaxFileBytes: max, MaxBackups: 1, BufferLines: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		l.Verdict(verdict.Verdict{Pid: int32(i + 1), Result: verdict.Gone, Reason: "exit observed", Mechanism: "netlink"})
		if i%50 == 0 {
			flush(t, l)
		}
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	size, blocks := allocated(t, path+".1")
	if size == 0 || size > max {
		t.Fatalf("rotated file has %d bytes, want some and at most %d", size, max)
	}
	if blocks > max+4096 {
		t.Errorf("rotated file of %d bytes has %d bytes of blocks, more than its rotation size %d", size, blocks, max)
	}
	if _, blocks := allocated(t, path); blocks == 0 {
		t.Errorf("the current file has no blocks reserved")
	}
}

// BenchmarkFileReserve measures the feed's writes to its file (256 KiB of
// lines at a time, rotated at 64 MiB with no backup kept), with the file's
// blocks reserved ahead and without.
func BenchmarkFileReserve(b *testing.B) {
	for _, on := range []bool{true, false} {
		name := "reserved"
		if !on {
			name = "unreserved"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			fo, err := openFile(filepath.Join(dir, "feed.log"), 64<<20, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer fo.close()
			if on && !fo.reserves {
				testenv.Skip(b, "no reservation on this filesystem")
			}
			s := newStreamSink(fo.writer(), fo)
			line := append(bytes.Repeat([]byte{'x'}, 1023), '\n')
			run := bytes.Repeat(line, 256)
			b.SetBytes(int64(len(run)))
			for b.Loop() {
				if !on {
					fo.reserves = false
				}
				if _, _, err := s.writeRun(run, 256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
