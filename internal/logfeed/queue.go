package logfeed

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxKeptLine bounds the buffer a ring slot keeps between lines: a slot
// that carried a larger line gives its buffer back to the garbage collector.
const maxKeptLine = 64 << 10

// slot is one buffered line.
type slot struct {
	buf    []byte
	sev    severity
	action string
	class  class
}

// queue is the bounded buffer between the callers and the sink. Callers
// put lines under a mutex held only for a copy; the drain goroutine takes
// them out one at a time by swapping buffers, so the sink is written
// without the mutex held and a blocked sink blocks nobody but drain.
type queue struct {
	mu        sync.Mutex
	slots     []slot
	head, n   int
	nProcess  int  // process events among the n
	closing   bool // no more lines; drain ends when empty
	abandoned bool
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
	report   func(dst []byte, d Drops) []byte
	stopped  atomic.Bool // abandoned: write no report
	scratch  []byte      // the drop report line
	sinkOnce sync.Once
	sinkErr  error
}

func newQueue(lines int, s sink, report func([]byte, Drops) []byte) *queue {
	q := &queue{slots: make([]slot, lines), sink: s, report: report, wake: make(chan struct{}, 1)}
	q.flushed = sync.NewCond(&q.mu)
	return q
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// put copies a line into the ring, or drops and counts it. In a full
// ring a line of another class takes the place of the newest process
// event (evict); a process event is dropped.
func (q *queue) put(p []byte, sev severity, action string, cls class) {
	q.mu.Lock()
	if q.closing || (q.n == len(q.slots) && (cls == classProcess || !q.evict())) {
		q.mu.Unlock()
		q.drop(cls, 1)
		return
	}
	s := &q.slots[(q.head+q.n)%len(q.slots)]
	s.buf = append(s.buf[:0], p...)
	s.sev, s.action, s.class = sev, action, cls
	q.n++
	if cls == classProcess {
		q.nProcess++
	}
	q.seq++
	q.mu.Unlock()
	q.signal()
}

// evict drops the newest process event in the ring, moving the lines
// after it down by one (swapping buffers), and reports whether there was
// one. q.mu is held.
func (q *queue) evict() bool {
	if q.nProcess == 0 {
		return false
	}
	at := func(i int) *slot { return &q.slots[(q.head+i)%len(q.slots)] }
	i := q.n - 1
	for at(i).class != classProcess {
		i--
	}
	for ; i < q.n-1; i++ {
		*at(i), *at(i + 1) = *at(i + 1), *at(i)
	}
	q.n--
	q.nProcess--
	q.drop(classProcess, 1)
	return true
}

// drop counts n lines of class cls as dropped.
func (q *queue) drop(cls class, n uint64) {
	q.dropped[cls].Add(n)
	q.pending[cls].Add(n)
}

// take moves the oldest line into *spare (swapping buffers) and reports
// whether there was one. It blocks until there is a line, or the queue is
// closing and empty.
func (q *queue) take(spare *slot) bool {
	for {
		q.mu.Lock()
		if q.n > 0 && !q.abandoned {
			s := &q.slots[q.head]
			s.buf, spare.buf = spare.buf[:0], s.buf
			spare.sev, spare.action, spare.class = s.sev, s.action, s.class
			if s.class == classProcess {
				q.nProcess--
			}
			if cap(s.buf) > maxKeptLine {
				s.buf = nil
			}
			q.head = (q.head + 1) % len(q.slots)
			q.n--
			q.mu.Unlock()
			return true
		}
		if q.closing || q.abandoned {
			q.mu.Unlock()
			return false
		}
		q.mu.Unlock()
		q.idle()
		<-q.wake
		q.maybeReopen()
	}
}

// idle runs when the ring is empty: flush the sink, and mark every line
// so far done for Flush callers.
func (q *queue) idle() {
	q.account(q.sink.flush())
	q.mu.Lock()
	if q.n == 0 {
		q.done = q.seq
		q.flushed.Broadcast()
	}
	q.mu.Unlock()
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
		return
	}
	if delivered == 0 || q.stopped.Load() {
		return
	}
	var n [numClasses]uint64
	for i := range n {
		n[i] = q.pending[i].Swap(0)
	}
	if d := dropsOf(&n); d.total() > 0 {
		q.scratch = q.report(q.scratch[:0], d)
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
			return
		}
		// A stream sink may have delivered a buffered line with the report.
		q.written.Add(uint64(max(sent-1, 0)))
		q.reports.Add(1)
	}
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
	var s slot
	for q.take(&s) {
		q.maybeReopen()
		q.account(q.sink.write(s.buf, s.sev, s.action))
		if cap(s.buf) > maxKeptLine {
			s.buf = nil
		}
	}
	q.mu.Lock()
	abandoned := q.abandoned
	q.mu.Unlock()
	if !abandoned {
		q.idle()
	}
	q.mu.Lock()
	// Lines left by an abandon are dropped.
	for ; q.n > 0; q.n-- {
		q.dropped[q.slots[q.head].class].Add(1)
		q.head = (q.head + 1) % len(q.slots)
	}
	q.nProcess = 0
	q.done = q.seq
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
