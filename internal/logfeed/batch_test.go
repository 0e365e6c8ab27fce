package logfeed

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// verdictsOnly keeps the verdict lines written to it and counts the
// others.
type verdictsOnly struct {
	lineBuf
	others atomic.Int64
}

func (w *verdictsOnly) Write(p []byte) (int, error) {
	for line := range bytes.SplitSeq(p, []byte{'\n'}) {
		switch {
		case len(line) == 0:
		case bytes.Contains(line, []byte(`"action":"`+ActionVerdict+`"`)):
			w.lineBuf.Write(append(line, '\n'))
		default:
			w.others.Add(1)
		}
	}
	return len(p), nil
}

func (w *verdictsOnly) flood() int64 { return w.others.Load() }

// countingWriter counts Write calls and the lines they carried, after
// blocking the first Write until released.
type countingWriter struct {
	blockingWriter
	cmu    sync.Mutex
	writes []int // lines per Write
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.blockingWriter.Write(p)
	w.cmu.Lock()
	w.writes = append(w.writes, strings.Count(string(p[:n]), "\n"))
	w.cmu.Unlock()
	return n, err
}

// TestBatchedWrites: lines that wait while the sink is busy reach it
// together, in one write of the stream.
func TestBatchedWrites(t *testing.T) {
	for _, tt := range []struct {
		name   string
		lines  int
		argLen int
		writes []int // lines per Write, after the first line's
	}{
		{name: "short lines", lines: 40, argLen: 10, writes: []int{40}},
		// Past the stream sink's batch buffer: what it holds (none
		// here), then the run in one write.
		{name: "long lines", lines: 40, argLen: 4 << 10, writes: []int{40}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &countingWriter{blockingWriter: *newBlockingWriter()}
			l, _ := newTestLogger(t, Config{Writer: w, ProcessEvents: AllKinds})
			ev := events.Event{Kind: events.Exec, Pid: 1, Mechanism: events.EBPF, Argv: []string{strings.Repeat("a", tt.argLen)}}
			l.Event(&ev)
			<-w.entered // the drain goroutine is stuck writing the first line
			for i := range tt.lines {
				ev.Pid = int32(i + 2)
				l.Event(&ev)
			}
			close(w.release)
			flush(t, l)
			w.cmu.Lock()
			defer w.cmu.Unlock()
			if len(w.writes) != 1+len(tt.writes) || w.writes[0] != 1 {
				t.Fatalf("writes carried %v lines, want [1 %v]", w.writes, tt.writes)
			}
			for i, n := range tt.writes {
				if w.writes[i+1] != n {
					t.Errorf("writes carried %v lines, want [1 %v]", w.writes, tt.writes)
				}
			}
			if st := l.Stats(); st.Written != uint64(tt.lines+1) || st.Dropped != 0 {
				t.Errorf("Stats = %+v, want %d written, none dropped", st, tt.lines+1)
			}
		})
	}
}

// TestByteBound: behind a blocked sink, long process lines are dropped
// once the buffered bytes reach maxBufferBytes, long before BufferLines;
// a verdict still gets in.
func TestByteBound(t *testing.T) {
	w := newBlockingWriter()
	l, _ := newTestLogger(t, Config{Writer: w, ProcessEvents: AllKinds, BufferLines: 1 << 20})
	long := strings.Repeat("x", DefaultArgsBytes/2)
	ev := events.Event{Kind: events.Exec, Pid: 1, Mechanism: events.EBPF, Argv: []string{long, long}}
	l.Event(&ev)
	<-w.entered
	const logged = 3000 // 3000 lines of over 16 KiB: three times the byte bound
	for i := range logged {
		ev.Pid = int32(i + 2)
		l.Event(&ev)
	}
	l.queueLen(func(n, bytes int) {
		if bytes > maxBufferBytes || n >= logged/2 {
			t.Errorf("buffered %d lines of %d bytes, want at most %d bytes", n, bytes, maxBufferBytes)
		}
	})
	st := l.Stats()
	if st.DroppedBy.ProcessEvents == 0 {
		t.Fatalf("Stats = %+v: nothing dropped past the byte bound", st)
	}
	l.Verdict(verdict.Verdict{Pid: 7, Result: verdict.Gone})
	if st := l.Stats(); st.DroppedBy.Verdicts != 0 {
		t.Errorf("Stats after a verdict into the full buffer = %+v, want it in", st)
	}
	close(w.release)
	flush(t, l)
	var verdicts, process int
	for _, line := range w.lines.lines(t) {
		switch getString(line, "event.action") {
		case ActionVerdict:
			verdicts++
		case ActionProcessExec:
			process++
		}
	}
	st = l.Stats()
	if verdicts != 1 || uint64(process)+st.DroppedBy.ProcessEvents != logged+1 {
		t.Errorf("%d verdicts and %d process lines written, %+v; want 1 and written+dropped = %d", verdicts, process, st, logged+1)
	}
}

// queueLen calls f with the lines and bytes buffered.
func (l *Logger) queueLen(f func(n, bytes int)) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	f(l.q.n, l.q.bytes)
}

// TestFlushUnderLoad: Flush returns once its lines are written although
// other goroutines keep logging, so the buffer never runs empty.
func TestFlushUnderLoad(t *testing.T) {
	// The flood's lines are counted and dropped, not kept: kept, they grow
	// without bound for as long as a loaded machine makes Flush take.
	out := &verdictsOnly{}
	l, _ := newTestLogger(t, Config{ProcessEvents: AllKinds, Writer: out})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ev := events.Event{Kind: events.Fork, Pid: 1, Mechanism: events.EBPF}
		for {
			select {
			case <-stop:
				return
			default:
				l.Event(&ev)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	testenv.Eventually(t, 30*time.Second, func() bool { return out.flood() > 0 }, "the flood wrote nothing")
	for i := range 5 {
		l.Verdict(verdict.Verdict{Pid: int32(100 + i), Result: verdict.Gone})
		flush(t, l)
		found := false
		for _, line := range out.lines(t) {
			if getString(line, "event.action") == ActionVerdict {
				if n, _ := getInt(line, "process.pid"); n == int64(100+i) {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("after Flush, the verdict on %d is not written", 100+i)
		}
	}
}

// writeSignal is a sink that passes each write on a channel.
type writeSignal chan []byte

func (w writeSignal) Write(p []byte) (int, error) {
	w <- append([]byte(nil), p...)
	return len(p), nil
}

// TestLingerByClass: a batch of process events waits processLinger (here
// an hour), a verdict line logged after them cuts the wait to batchLinger,
// and a verdict alone waits batchLinger.
func TestLingerByClass(t *testing.T) {
	old := processLinger
	processLinger = time.Hour
	t.Cleanup(func() { processLinger = old })
	ev := events.Event{Kind: events.Fork, Pid: 7, Mechanism: events.EBPF}
	for _, tt := range []struct {
		name    string
		process bool // a process event first
		verdict bool // then a verdict line
		waits   bool // no write before a Flush
	}{
		{name: "process events only", process: true, waits: true},
		{name: "process events then a verdict", process: true, verdict: true},
		{name: "a verdict only", verdict: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := make(writeSignal, 16)
			l, _ := newTestLogger(t, Config{Writer: w, ProcessEvents: AllKinds})
			if tt.process {
				l.Event(&ev)
			}
			if tt.verdict {
				if tt.process {
					// Past the drain goroutine's look at the batch, so
					// the verdict must cut a wait already started.
					time.Sleep(batchLinger / 2)
				}
				l.Verdict(verdict.Verdict{Pid: 8, Result: verdict.Gone})
			}
			wait := 30 * time.Second // batchLinger, on however loaded a host
			if tt.waits {
				wait = 5 * batchLinger // a write by now did not wait processLinger
			}
			select {
			case p := <-w:
				if tt.waits {
					t.Fatalf("process events written before processLinger or a Flush: %s", p)
				}
				if n := bytes.Count(p, []byte{'\n'}); n != btoi(tt.process)+btoi(tt.verdict) {
					t.Errorf("the write carried %d lines, want the batch's all: %s", n, p)
				}
			case <-time.After(wait):
				if !tt.waits {
					t.Fatalf("nothing written after %v: the batch waited for processLinger", wait)
				}
				flush(t, l)
				if p := <-w; bytes.Count(p, []byte{'\n'}) != 1 {
					t.Errorf("Flush wrote %s, want the process event", p)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestQuietSeesLateLine: a line put as idle's timer fires (the timer has
// fired, the line's wake-up is not yet taken) ends the quiet: the batch
// keeps the line, instead of being emptied by the trim that follows.
func TestQuietSeesLateLine(t *testing.T) {
	q := newQueue(100, newStreamSink(&lineBuf{}, nil), func(b []byte, _ Drops, _ []uidDrops) []byte { return b })
	t.Cleanup(func() { q.cur.arena.free(); q.spare.arena.free() }) // no drain goroutine runs
	q.put([]byte("{}\n"), sevInfo, "", classProcess, noUID)
	<-q.wake // the line's wake-up has not reached the drain goroutine yet
	tm := time.NewTimer(time.Hour)
	if q.quiet(tm, time.Nanosecond) {
		q.mu.Unlock()
		t.Fatal("quiet reported no line with a line in the batch")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.cur.lines) != 1 || q.n != 1 {
		t.Errorf("the batch holds %d lines (count %d), want the 1 put", len(q.cur.lines), q.n)
	}
}
