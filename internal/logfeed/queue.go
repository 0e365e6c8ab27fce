package logfeed

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Batching. The drain goroutine is woken when the buffer goes from empty
// to not empty, then lingers (unless the buffer passes batchBytes, or
// Flush, Close or Reopen asks) and hands everything buffered to the sink
// at once: under a storm of process events, one wake-up and one write per
// batch instead of per line. A batch of process events only lingers
// processLinger; the first line of another class (an audit, verdict or
// signal line, which an operator waits for) cuts the wait to batchLinger
// from the batch's start. Each write costs wake-ups of the runtime beyond
// the write itself (below), so a moderate storm (a few thousand execs a
// second, megabytes a second) written once a second costs less than one
// written ten times. Under a storm a batch fills to
// batchBytes first, so the write is started by a caller logging (while the
// event path runs anyway) rather than by a timer of its own: a process
// that wakes from idle more often makes the runtime's sysmon thread tick
// at its fastest more often, which costs more than the write.
//
// A batch is large (2 MiB) because of that sysmon thread: a goroutine that
// enters a system call while sysmon sleeps (the process was idle when it
// last looked) wakes it and resets it to its 20 us tick, about twenty
// thread switches before it slows down again. Under a storm the process
// idles between the event reader's polls, so nearly every write does that:
// with 512 KiB batches and 4 KiB argument vectors, 200 wake-ups and 6,400
// thread switches per 20,000 execs; with 2 MiB, 30 and 3,400. A file on a
// local filesystem is now written raw (quietfile), which wakes nothing;
// the batch size still serves stdout, a FIFO, a network filesystem and
// syslog. The buffers
// a storm grew are given back once the queue has been empty a second; the
// bytes live outside the Go heap (arena.go).
// processLinger is how long a batch of process events only waits (a
// variable for the tests).
var processLinger = time.Second

const (
	batchLinger = 100 * time.Millisecond
	batchBytes  = 2 << 20
	// maxBufferBytes bounds the bytes of the lines waiting (as BufferLines
	// bounds their number): a storm of long command lines must not hold
	// thousands of them. 16 MiB is a third of a second of a storm of 4 KiB
	// argument vectors, about what 4096 lines of short ones are.
	maxBufferBytes = 16 << 20
	// keepBufferBytes bounds the buffer a batch keeps for the next one:
	// what a stalled sink made grow is given back once written.
	keepBufferBytes = 2 * batchBytes
	// idleBufferBytes bounds the buffers kept once the queue has been empty
	// for idleTrim: a quiet feed holds a few KiB, not the megabytes a storm
	// needed.
	idleBufferBytes = 64 << 10
	idleTrim        = time.Second
)

// idleArena is how long the feed must be quiet before the pages its batches
// wrote in their arenas are given back (see idle); longer than idleTrim. A
// variable for tests.
var idleArena = time.Minute

// lineMeta describes one buffered line: where it ends in the batch's
// bytes, and what the sink needs to know about it.
type lineMeta struct {
	end     int
	sev     severity
	class   class
	evicted bool // gave way to another line: dropped
	uid     uint32
	action  string
}

// noUID is the uid of a line that names none (every line but a process
// event, and a process event whose mechanism read no ids).
const noUID = ^uint32(0)

// batch is lines back to back, each ending in '\n', in its arena.
type batch struct {
	buf   []byte
	lines []lineMeta
	arena arena
}

// reset empties b for the next batch; a buffer that grew on the heap is
// given back when past keepBufferBytes (what a stalled sink made grow).
func (b *batch) reset() { b.trim(keepBufferBytes) }

// trimIdle empties b and gives back any heap buffer past idleBufferBytes:
// the feed has been quiet for idleTrim.
func (b *batch) trimIdle() { b.trim(idleBufferBytes) }

// trim empties b, and gives back a heap buffer past limit bytes (and a
// line index past the lines of limit bytes of 256-byte lines).
func (b *batch) trim(limit int) {
	if b.arena.mem == nil && cap(b.buf) > limit {
		b.buf = nil
	}
	if cap(b.lines) > limit/256 {
		b.lines = nil
	}
	b.buf, b.lines = b.arena.reuse(b.buf), b.lines[:0]
}

// start returns where line i begins.
func (b *batch) start(i int) int {
	if i == 0 {
		return 0
	}
	return b.lines[i-1].end
}

// queue is the bounded buffer between the callers and the sink. Callers
// append lines to the current batch under a mutex held only for a copy;
// the drain goroutine swaps the whole batch for its spare and writes it
// without the mutex held, so a blocked sink blocks nobody but drain.
type queue struct {
	mu        sync.Mutex
	cur       batch
	spare     batch // the batch being written (by drain without mu), then the next one
	n         int   // live lines in cur (not evicted)
	nProcess  int   // process events among the n
	bytes     int   // bytes of the n
	maxLines  int
	closing   bool // no more lines; drain ends when empty
	abandoned bool
	urgent    bool   // write without lingering (Flush, Close, a full batch)
	seq       uint64 // lines accepted so far (for flush)
	wake      chan struct{}
	flushed   *sync.Cond // signalled when done advances

	done     uint64 // lines handed to the sink or dropped, by seq (under mu)
	sink     sink
	reopen   atomic.Bool
	pending  [numClasses]atomic.Uint64 // drops not yet reported
	dropped  [numClasses]atomic.Uint64
	written  atomic.Uint64
	reports  atomic.Uint64
	reopens  atomic.Uint64
	lastErr  atomic.Pointer[string]
	report   func(dst []byte, d Drops, top []uidDrops) []byte
	stopped  atomic.Bool // abandoned: write no report
	scratch  []byte      // the drop report line
	sinkOnce sync.Once
	sinkErr  error
	// onSink, when set, is told when the sink starts failing (its
	// error) and when it delivers again (nil): once for each change.
	onSink  func(error)
	failing atomic.Bool
	// byUID counts the live process events of each uid in cur, kept
	// only while counted (from the first time the buffer is full until
	// it is taken): a buffer that never fills costs nothing.
	byUID   map[uint32]int
	counted bool
	// dropUID counts the process events of each uid dropped and not yet
	// reported (under mu).
	dropUID map[uint32]uint64
}

func newQueue(lines int, s sink, report func([]byte, Drops, []uidDrops) []byte) *queue {
	q := &queue{maxLines: lines, sink: s, report: report, wake: make(chan struct{}, 1),
		byUID: map[uint32]int{}, dropUID: map[uint32]uint64{}}
	q.cur.arena, q.spare.arena = newArena(arenaBytes), newArena(arenaBytes)
	q.cur.reset()
	q.spare.reset()
	q.flushed = sync.NewCond(&q.mu)
	return q
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// full reports whether a line of size bytes does not fit. q.mu is held.
func (q *queue) full(size int) bool {
	return q.n >= q.maxLines || q.n > 0 && q.bytes+size > maxBufferBytes
}

// put copies a line into the buffer, or drops and counts it. A full
// buffer makes room fairly: a line of another class takes the place of a
// process event, and a process event of uid takes the place of one of the
// uid whose process events the buffer holds most of, unless that is uid
// itself (see evict): one user's fork storm loses its own lines, not the
// other users' (nor the audit, verdict and signal lines). Only a line
// that finds the buffer empty, or fills a batch, wakes the drain
// goroutine.
func (q *queue) put(p []byte, sev severity, action string, cls class, uid uint32) {
	q.mu.Lock()
	if q.closing || (q.full(len(p)) && !q.evict(cls, uid)) {
		if cls == classProcess {
			q.dropUID[uid]++
		}
		q.mu.Unlock()
		q.drop(cls, 1)
		return
	}
	// The drain goroutine lingers longer over process events only: the
	// first line of another class must shorten its wait.
	wake := q.n == 0 || cls != classProcess && q.n == q.nProcess
	q.cur.buf = append(q.cur.buf, p...)
	q.cur.lines = append(q.cur.lines, lineMeta{end: len(q.cur.buf), sev: sev, class: cls, uid: uid, action: action})
	q.n++
	q.bytes += len(p)
	if cls == classProcess {
		q.nProcess++
		if q.counted {
			q.byUID[uid]++
		}
	}
	q.seq++
	if !q.urgent && (q.bytes >= batchBytes || 2*q.n >= q.maxLines) {
		q.urgent, wake = true, true
	}
	q.mu.Unlock()
	if wake {
		q.signal()
	}
}

// evict makes room in a full buffer for a line of class cls (of uid, for
// a process event): it drops the newest process event of the uid with the
// most of them in the buffer (its bytes stay, marked), and reports whether
// it did. It does not when the buffer holds no process event, nor for a
// process event whose own uid has the most (ties included): that line is
// the one to drop. q.mu is held.
func (q *queue) evict(cls class, uid uint32) bool {
	if q.nProcess == 0 {
		return false
	}
	if !q.counted {
		clear(q.byUID)
		for i := range q.cur.lines {
			if m := &q.cur.lines[i]; m.class == classProcess && !m.evicted {
				q.byUID[m.uid]++
			}
		}
		q.counted = true
	}
	most, n := noUID, 0
	for u, c := range q.byUID {
		if c > n || c == n && u < most {
			most, n = u, c
		}
	}
	if cls == classProcess && q.byUID[uid] >= n {
		return false
	}
	i := len(q.cur.lines) - 1
	for ; i >= 0; i-- {
		if m := &q.cur.lines[i]; m.class == classProcess && !m.evicted && m.uid == most {
			break
		}
	}
	if i < 0 {
		return false // cannot happen: byUID counts the lines
	}
	m := &q.cur.lines[i]
	m.evicted = true
	q.n--
	q.nProcess--
	q.byUID[most]--
	q.dropUID[most]++
	q.bytes -= m.end - q.cur.start(i)
	q.drop(classProcess, 1)
	return true
}

// drop counts n lines of class cls as dropped.
func (q *queue) drop(cls class, n uint64) {
	q.dropped[cls].Add(n)
	q.pending[cls].Add(n)
}

// await blocks until there are lines to write and reports true, or
// reports false when the queue is closing and empty, or abandoned. While
// the buffer is empty every line so far is done, for Flush callers.
func (q *queue) await(t *time.Timer) bool {
	for {
		q.mu.Lock()
		switch {
		case q.abandoned:
			q.mu.Unlock()
			return false
		case len(q.cur.lines) > 0:
			q.mu.Unlock()
			return true
		case q.closing:
			q.mu.Unlock()
			return false
		}
		q.urgent = false
		q.done = q.seq
		q.flushed.Broadcast()
		q.mu.Unlock()
		q.idle(t)
		q.maybeReopen()
	}
}

// idle waits for a line (or Flush, Close, Reopen). After idleTrim without
// one, it gives back the heap buffers a storm grew; after idleArena, the
// pages the batches wrote in their arenas too; then it waits on: two
// timers per quiet stretch, none while lines keep coming. Giving them back
// at once would make every storm's next batch grow them again (the queue
// runs empty between the event reader's polls).
//
// The arenas are kept longer than the heap buffers because writing them
// again is what costs: a page given back is a page fault and a zeroed page
// at its next first write. On a 2-core PVM guest (a fault there takes
// 12 µs) a storm of 3,000 execs logged to a file 2.5 s after another cost
// the daemon 37.6-38.5 µs per exec with the arenas given back after a
// quiet second, 19.2-20.7 µs with them kept. The price is their resident
// pages, at most arenaBytes each (about 1 MiB per batch at 700 execs/s),
// for idleArena after a storm.
func (q *queue) idle(t *time.Timer) {
	if !q.quiet(t, idleTrim) {
		return
	}
	q.cur.trimIdle()
	q.spare.trimIdle()
	q.mu.Unlock()
	if !q.quiet(t, idleArena-idleTrim) {
		return
	}
	q.cur.arena.release()
	q.spare.arena.release()
	q.mu.Unlock()
	<-q.wake
}

// quiet waits d for a line and reports whether none came: it then returns
// with q.mu held and the current batch empty (a line put as the timer
// fired makes it report false, its wake-up pending or on its way). The
// spare batch is the drain goroutine's own: it holds the last batch
// written until the first trimIdle empties it.
func (q *queue) quiet(t *time.Timer, d time.Duration) bool {
	t.Reset(d)
	select {
	case <-q.wake:
		t.Stop()
		return false
	case <-t.C:
	}
	q.mu.Lock()
	if len(q.cur.lines) > 0 {
		q.mu.Unlock()
		return false
	}
	return true
}

// linger waits for more lines to join the batch: batchLinger from the
// batch's start (the wake-up that ended idle), processLinger while it holds
// process events only, and less when the batch must go now.
func (q *queue) linger(t *time.Timer) {
	select { // a stale wake-up from a line put during the last write
	case <-q.wake:
	default:
	}
	start := time.Now()
	for {
		q.mu.Lock()
		now := q.urgent || q.closing || q.abandoned
		wait := batchLinger
		if q.n > 0 && q.n == q.nProcess {
			wait = processLinger
		}
		q.mu.Unlock()
		left := wait - time.Since(start)
		if now || left <= 0 {
			return
		}
		t.Reset(left)
		select {
		case <-t.C:
			return
		case <-q.wake:
			t.Stop()
		}
	}
}

// take swaps the buffered batch for spare (emptied) and returns the seq
// of its last line; ok is false when the queue was abandoned.
func (q *queue) take(spare *batch) (seq uint64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	spare.reset()
	if q.abandoned {
		return 0, false
	}
	q.cur, *spare = *spare, q.cur
	q.n, q.nProcess, q.bytes, q.urgent, q.counted = 0, 0, 0, false, false
	return q.seq, true
}

// runWriter is a sink that takes several lines in one call (a stream
// sink: the batch goes to the output in one write, without a copy).
type runWriter interface {
	writeRun(p []byte, lines int) (delivered, lost int, err error)
}

// writeBatch hands the lines of b to the sink: runs of lines between
// evicted ones at once to a runWriter, one by one to another sink.
func (q *queue) writeBatch(b *batch) {
	rw, runs := q.sink.(runWriter)
	from, count := 0, 0
	emit := func(to int) {
		if count > 0 {
			q.account(rw.writeRun(b.buf[from:to], count))
		}
	}
	for i := range b.lines {
		m := &b.lines[i]
		start := b.start(i)
		switch {
		case m.evicted:
			if runs {
				emit(start)
				from, count = m.end, 0
			}
		case runs:
			count++
		default:
			q.account(q.sink.write(b.buf[start:m.end], m.sev, m.action))
		}
	}
	if runs {
		emit(len(b.buf))
	}
}

// account counts what a sink call delivered and lost, and reports
// earlier drops once the sink has delivered something again.
func (q *queue) account(delivered, lost int, err error) {
	q.written.Add(uint64(delivered))
	if lost > 0 {
		q.drop(classSink, uint64(lost))
	}
	if err != nil {
		msg := err.Error()
		q.lastErr.Store(&msg)
		if !q.failing.Swap(true) && q.onSink != nil {
			q.onSink(err)
		}
		return
	}
	if delivered == 0 || q.stopped.Load() {
		return
	}
	if q.failing.Swap(false) && q.onSink != nil {
		q.onSink(nil)
	}
	var n [numClasses]uint64
	for i := range n {
		n[i] = q.pending[i].Swap(0)
	}
	if d := dropsOf(&n); d.total() > 0 {
		top := q.takeDropUIDs()
		q.scratch = q.report(q.scratch[:0], d, top)
		sent, lost, err := q.sink.write(q.scratch, sevWarning, ActionLogLinesDropped)
		if err == nil && lost == 0 {
			var more int
			more, lost, err = q.sink.flush()
			sent += more
		}
		if err != nil || lost > 0 {
			for i := range n { // try again after the next success
				q.pending[i].Add(n[i])
			}
			q.mu.Lock()
			for _, u := range top {
				q.dropUID[u.uid] += u.lines
			}
			q.mu.Unlock()
			return
		}
		// A stream sink may have delivered a buffered line with the report.
		q.written.Add(uint64(max(sent-1, 0)))
		q.reports.Add(1)
	}
}

// takeDropUIDs returns the uids that lost the most process events since
// the last report (at most maxDropUIDs, most first, ties by uid) and
// forgets every uid's count.
func (q *queue) takeDropUIDs() []uidDrops {
	q.mu.Lock()
	defer q.mu.Unlock()
	var top []uidDrops
	for uid, n := range q.dropUID {
		top = append(top, uidDrops{uid, n})
	}
	clear(q.dropUID)
	slices.SortFunc(top, func(a, b uidDrops) int {
		if a.lines != b.lines {
			return cmp.Compare(b.lines, a.lines)
		}
		return cmp.Compare(a.uid, b.uid)
	})
	return top[:min(len(top), maxDropUIDs)]
}

func (q *queue) maybeReopen() {
	if !q.reopen.Swap(false) {
		return
	}
	if err := q.sink.reopen(); err != nil {
		msg := "reopen: " + err.Error()
		q.lastErr.Store(&msg)
		return
	}
	q.reopens.Add(1)
}

// drain is the body of the drain goroutine: it ends when the queue is
// closed and empty, or abandoned.
func (q *queue) drain() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for q.await(t) {
		q.linger(t)
		seq, ok := q.take(&q.spare)
		if !ok {
			break
		}
		q.maybeReopen()
		q.writeBatch(&q.spare)
		q.account(q.sink.flush())
		q.mu.Lock()
		q.done = max(q.done, seq)
		q.flushed.Broadcast()
		q.mu.Unlock()
	}
	q.mu.Lock()
	// Lines left by an abandon are dropped.
	for _, m := range q.cur.lines {
		if !m.evicted {
			q.dropped[m.class].Add(1)
		}
	}
	q.cur.reset()
	q.n, q.nProcess, q.bytes, q.counted = 0, 0, 0, false
	q.done = q.seq
	// The queue is closing (put appends nothing) and the sink has
	// returned: nothing uses the arenas' bytes any more.
	q.cur.arena.free()
	q.spare.arena.free()
	q.cur.buf, q.spare.buf = nil, nil
	q.flushed.Broadcast()
	q.mu.Unlock()
}

func (q *queue) requestReopen() {
	q.reopen.Store(true)
	q.signal()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.signal()
}

// abandon makes drain stop taking lines; the ones left are dropped.
func (q *queue) abandon() {
	q.mu.Lock()
	q.abandoned = true
	q.closing = true
	q.stopped.Store(true)
	q.flushed.Broadcast()
	q.mu.Unlock()
	q.signal()
}

func (q *queue) closeSink() error {
	q.sinkOnce.Do(func() { q.sinkErr = q.sink.close() })
	return q.sinkErr
}

// flush waits until every line accepted before the call is done.
func (q *queue) flush(ctx context.Context) error {
	q.mu.Lock()
	target := q.seq
	q.urgent = true
	q.mu.Unlock()
	q.signal()
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.flushed.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.done < target && !q.abandoned {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.flushed.Wait()
	}
	return nil
}

func (q *queue) stats() Stats {
	var n [numClasses]uint64
	for i := range n {
		n[i] = q.dropped[i].Load()
	}
	st := Stats{
		Written:     q.written.Load(),
		DroppedBy:   dropsOf(&n),
		DropReports: q.reports.Load(),
		Reopens:     q.reopens.Load(),
	}
	if p := q.lastErr.Load(); p != nil {
		st.LastSinkError = *p
	}
	st.Dropped = st.DroppedBy.total()
	return st
}

// nextLine returns the first line of p (through its '\n') and the rest.
func nextLine(p []byte) (line, rest []byte) {
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return p, nil
	}
	return p[:i+1], p[i+1:]
}
