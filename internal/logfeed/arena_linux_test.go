package logfeed

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// resident counts the pages of q's two arenas that are in memory.
func resident(t *testing.T, q *queue) int {
	t.Helper()
	q.mu.Lock() // the arenas are freed under it
	n, err := residentPages(&q.cur.arena)
	m, err2 := residentPages(&q.spare.arena)
	q.mu.Unlock()
	if err := errors.Join(err, err2); err != nil {
		t.Fatal(err)
	}
	return n + m
}

func residentPages(a *arena) (int, error) {
	if a.mem == nil {
		return 0, errors.New("the batch has no arena")
	}
	ps := unix.Getpagesize()
	vec := make([]byte, (cap(a.mem)+ps-1)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(a.mem))), uintptr(cap(a.mem)),
		uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore: %w", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}

// longExec is an exec event of a line of over 4 KiB.
func longExec() events.Event {
	return events.Event{Kind: events.Exec, Pid: 1, Mechanism: events.EBPF, Argv: []string{strings.Repeat("a", 4<<10)}}
}

// burstArena writes a burst of long lines through l and returns the most
// pages of its arenas seen resident during it.
func burstArena(t *testing.T, l *Logger) int {
	t.Helper()
	ev := longExec()
	const burst = 2000 // about 9 MiB: several batches
	most := 0
	for i := range burst {
		ev.Pid = int32(i + 2)
		l.Event(&ev)
		if i%100 == 0 {
			most = max(most, resident(t, l.q))
		}
	}
	flush(t, l)
	if most == 0 {
		t.Fatal("no page of the arenas was resident during the burst")
	}
	return most
}

// setIdleArena sets idleArena for one test.
func setIdleArena(t *testing.T, d time.Duration) {
	old := idleArena
	idleArena = d
	t.Cleanup(func() { idleArena = old })
}

// TestArenaReleased: the pages a burst of long lines wrote in the batches'
// arenas are resident while the feed is busy and given back once it has
// been quiet for idleArena; every line is written.
func TestArenaReleased(t *testing.T) {
	setIdleArena(t, 2*idleTrim)
	out := &lineBuf{}
	l, _ := newTestLogger(t, Config{Writer: out, ProcessEvents: AllKinds})
	most := burstArena(t, l)
	testenv.Eventually(t, 30*time.Second, func() bool { return resident(t, l.q) == 0 },
		"the quiet feed keeps the pages of its arenas (%d during the burst)", most)
	ev := longExec()
	ev.Pid = 1
	l.Event(&ev)
	flush(t, l)
	if n := len(out.lines(t)); n != 2001 {
		t.Errorf("%d lines written, want %d", n, 2001)
	}
}

// TestArenaKept: past idleTrim, while idleArena has not passed, the arenas
// keep their pages, so the next storm does not fault them in again.
func TestArenaKept(t *testing.T) {
	setIdleArena(t, time.Hour)
	out := &lineBuf{}
	l, _ := newTestLogger(t, Config{Writer: out, ProcessEvents: AllKinds})
	burstArena(t, l)
	time.Sleep(3 * idleTrim) // the heap buffers are trimmed by now
	if n := resident(t, l.q); n == 0 {
		t.Fatalf("the arenas gave their pages back after %v, before idleArena (%v)", 3*idleTrim, idleArena)
	}
}

// TestArenaSpill: behind a stalled sink a batch grows past its arena onto
// the heap; every line still reaches the sink whole, and the next batch is
// back in the arena.
func TestArenaSpill(t *testing.T) {
	w := newBlockingWriter()
	l, _ := newTestLogger(t, Config{Writer: w, ProcessEvents: AllKinds})
	ev := longExec()
	l.Event(&ev)
	<-w.entered // the drain goroutine is stuck writing the first line
	lines := arenaBytes/(4<<10) + 100
	for i := range lines {
		ev.Pid = int32(i + 2)
		l.Event(&ev)
	}
	l.q.mu.Lock()
	spilled := !l.q.cur.arena.holds(l.q.cur.buf)
	l.q.mu.Unlock()
	if !spilled {
		t.Fatalf("%d lines of 4 KiB did not spill past the %d-byte arena", lines, arenaBytes)
	}
	close(w.release)
	flush(t, l)
	got := w.lines.lines(t)
	if len(got) != lines+1 {
		t.Fatalf("%d lines written, want %d", len(got), lines+1)
	}
	for i, line := range got {
		if pid, _ := getInt(line, "process.pid"); pid != int64(i+1) {
			t.Fatalf("line %d is of pid %d, want %d", i, pid, i+1)
		}
	}
	// The spilled batch is emptied when the next one is taken.
	l.Event(&ev)
	flush(t, l)
	l.q.mu.Lock()
	back := l.q.cur.arena.holds(l.q.cur.buf) && l.q.spare.arena.holds(l.q.spare.buf)
	l.q.mu.Unlock()
	if !back {
		t.Error("after the spill was written, the batches are not back in their arenas")
	}
}

// TestArenaOffHeap: megabytes of buffered lines do not grow the Go heap
// (only their index does), so they do not raise the collector's goal.
func TestArenaOffHeap(t *testing.T) {
	w := newBlockingWriter()
	l, _ := newTestLogger(t, Config{Writer: w, ProcessEvents: AllKinds})
	ev := longExec()
	l.Event(&ev)
	<-w.entered
	defer close(w.release)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const lines = 350 // about 3 MiB (an exec line carries its 4 KiB twice), within the arena
	for i := range lines {
		ev.Pid = int32(i + 2)
		l.Event(&ev)
	}
	var buffered int
	l.q.mu.Lock()
	buffered = l.q.bytes
	l.q.mu.Unlock()
	grew := int64(heap()) - int64(before)
	if buffered < 2<<20 || grew > 1<<20 {
		t.Errorf("with %d bytes of lines buffered the heap grew %d bytes, want under 1 MiB", buffered, grew)
	}
}
