package logfeed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeLines(t, b)
}

func TestFileRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "feed.log")
	const max, backups = 4096, 2
	l, err := New(Config{Output: "file:" + path, MaxFileBytes: max, MaxBackups: backups, BufferLines: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		l.Verdict(verdict.Verdict{Pid: int32(i + 1), Result: verdict.Gone, Reason: "exit observed", Mechanism: "netlink"})
		if i%20 == 0 {
			flush(t, l) // small batches, so that rotation happens between them
		}
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Dropped != 0 || st.Written != n {
		t.Fatalf("Stats %+v, want %d written and none dropped", st, n)
	}
	var last int64 = n + 1
	for _, name := range []string{path, path + ".1", path + ".2"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatalf("after rotation: %v", err)
		}
		if fi.Size() > max {
			t.Errorf("%s has %d bytes, more than MaxFileBytes %d", name, fi.Size(), max)
		}
		lines := readLines(t, name)
		if len(lines) == 0 {
			t.Errorf("%s is empty", name)
			continue
		}
		// Newer files hold later pids: the order survives rotation.
		first, _ := getInt(lines[0], "process.pid")
		end, _ := getInt(lines[len(lines)-1], "process.pid")
		if end >= last {
			t.Errorf("%s ends with pid %d, not before the next file's first %d", name, end, last)
		}
		last = first
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("%s.3 exists (err %v) with MaxBackups %d", path, err, backups)
	}
}

// TestFileReopenOnSIGHUP: after logrotate moves the file and sends SIGHUP,
// the feed writes to a new file at the path.
func TestFileReopenOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "feed.log")
	l, err := New(Config{Output: "file:" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.ReopenOnSignal(ctx, syscall.SIGHUP)

	l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
	flush(t, l)
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The signal is delivered asynchronously.
	testenv.Eventually(t, 10*time.Second, func() bool { return l.Stats().Reopens != 0 }, "no reopen after SIGHUP")
	l.Verdict(verdict.Verdict{Pid: 2, Result: verdict.Gone})
	flush(t, l)
	for name, want := range map[string]int64{path + ".old": 1, path: 2} {
		lines := readLines(t, name)
		if len(lines) != 1 {
			t.Errorf("%s has %d lines, want 1", name, len(lines))
			continue
		}
		if pid, _ := getInt(lines[0], "process.pid"); pid != want {
			t.Errorf("%s holds pid %d, want %d", name, pid, want)
		}
	}
}

// TestFileUnwritable: a file that cannot be reopened costs lines, counted,
// and the feed recovers once it can write again.
func TestFileUnwritable(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "logs")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "feed.log")
	l, err := New(Config{Output: "file:" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	// Replace the directory by a file: reopening the path now fails.
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l.Reopen()
	l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
	flush(t, l)
	if st := l.Stats(); st.Dropped != 1 || st.LastSinkError == "" {
		t.Fatalf("Stats %+v, want 1 dropped with an error", st)
	}
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	l.Verdict(verdict.Verdict{Pid: 2, Result: verdict.Gone})
	flush(t, l)
	var got []string
	for _, line := range readLines(t, path) {
		got = append(got, fmt.Sprint(getString(line, "event.action")))
	}
	if len(got) != 2 || got[0] != ActionVerdict || got[1] != ActionLogLinesDropped {
		t.Errorf("lines %v, want the verdict then the drop report", got)
	}
}

// TestFileOutputNotRegular: a device or a FIFO named as the log file is
// written as a stream, never rotated: rotating file:/dev/null renamed the
// device to /dev/null.1 and created a regular file in its place. The test
// uses its own null device node and a FIFO, never /dev/null.
func TestFileOutputNotRegular(t *testing.T) {
	for _, kind := range []string{"device", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out")
			switch kind {
			case "device":
				testenv.RequireRoot(t)
				if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // 1:3, null
					t.Fatal(err)
				}
			case "fifo":
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
				// A reader drains it, so that writes never block.
				r, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				go func() {
					buf := make([]byte, 64<<10)
					for {
						if _, err := r.Read(buf); err != nil {
							return
						}
					}
				}()
			}
			before, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			l, err := New(Config{Output: "file:" + path, MaxFileBytes: 512, MaxBackups: 2, BufferLines: 1024})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				l.Verdict(verdict.Verdict{Pid: int32(i + 1), Result: verdict.Gone, Reason: "exit observed", Mechanism: "netlink"})
				if i%10 == 0 {
					flush(t, l)
				}
			}
			if err := l.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			after, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Errorf("%s after 100 lines past a 512-byte rotation size: %v, want the same %v", path, after.Mode(), before.Mode())
			}
			for _, p := range []string{path + ".1", path + ".2"} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: %v, want no rotated file", p, err)
				}
			}
		})
	}
}

// TestFileNotThroughSymlink: a symlink put where the log file is, as after
// a rotation, is not followed: the file it names is left as it was, and
// the drop is counted with the reason.
func TestFileNotThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "feed.log")
	l, err := New(Config{Output: "file:" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("untouched\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	l.Reopen()
	l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
	flush(t, l)
	if b, err := os.ReadFile(victim); err != nil || string(b) != "untouched\n" {
		t.Errorf("the symlink's target holds %q (%v), want it untouched", b, err)
	}
	if st := l.Stats(); st.Dropped != 1 || !strings.Contains(st.LastSinkError, "symbolic link") {
		t.Errorf("Stats %+v, want 1 dropped, the error naming the symlink", st)
	}
}

// TestFileFIFOWithoutReader: a FIFO without a reader named as the log
// file fails at once instead of blocking in open until a reader comes: at
// the start, an error; at a reopen (SIGHUP), a counted drop, and the
// logger still closes.
func TestFileFIFOWithoutReader(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	within := func(what string, f func()) {
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waiting after 10 s", what)
		}
	}
	within("New on a FIFO without a reader", func() {
		if _, err := New(Config{Output: "file:" + fifo}); err == nil || !strings.Contains(err.Error(), "no such device") {
			t.Errorf("New = %v, want the FIFO's ENXIO", err)
		}
	})
	path := filepath.Join(dir, "feed.log")
	l, err := New(Config{Output: "file:" + path})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	within("a reopen onto a FIFO without a reader", func() {
		l.Reopen()
		l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
		flush(t, l)
	})
	if st := l.Stats(); st.Dropped == 0 || !strings.Contains(st.LastSinkError, "no such device") {
		t.Errorf("Stats %+v, want a drop with the FIFO's ENXIO", st)
	}
	within("Close", func() { l.Close(context.Background()) })
}
