package events

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// TextHeader is the header line of the text event table (AppendText), with
// its newline.
const TextHeader = "KIND       PID    PPID  COMM             TOKEN / DETAIL\n"

// FlushEvery is how often a started Writer flushes what it buffered.
const FlushEvery = 100 * time.Millisecond

// Writer prints events as lines, text (AppendText under TextHeader) or JSON
// (AppendJSON), into a buffer that it flushes every FlushEvery and on Close,
// without allocating per event. Write may be called from a source's
// goroutine before the caller knows whether the source started: it waits
// until Start, so that no event line comes before the header, and a source
// that failed to start leaves nothing printed. The owner calls Start (once,
// if the source started) and then Close; the flusher goroutine Start
// starts ends in Close.
type Writer struct {
	json    bool
	started chan struct{} // closed by Start
	stop    chan struct{} // closed by Close
	flushed chan struct{} // closed when the flusher ends

	mu     sync.Mutex
	w      *bufio.Writer
	buf    []byte
	closed bool // Write drops events once set
}

// NewWriter returns a Writer to w; asJSON selects JSON lines.
func NewWriter(w io.Writer, asJSON bool) *Writer {
	return &Writer{
		json:    asJSON,
		started: make(chan struct{}),
		stop:    make(chan struct{}),
		flushed: make(chan struct{}),
		w:       bufio.NewWriterSize(w, 64<<10),
	}
}

// Write prints ev, once Start has been called; after Close it drops ev. It
// does not keep ev.
func (w *Writer) Write(ev *Event) {
	<-w.started
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.json {
		w.buf = AppendJSON(w.buf[:0], ev)
	} else {
		w.buf = AppendText(w.buf[:0], ev)
	}
	w.buf = append(w.buf, '\n')
	w.w.Write(w.buf)
}

// Start writes the header (text only), lets Write print, and starts
// flushing every FlushEvery. Call it once, after the source started.
func (w *Writer) Start() {
	if !w.json {
		w.w.WriteString(TextHeader)
	}
	close(w.started)
	go w.flushLoop()
}

func (w *Writer) flushLoop() {
	defer close(w.flushed)
	tick := time.NewTicker(FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			w.mu.Lock()
			w.w.Flush()
			w.mu.Unlock()
		}
	}
}

// Close stops the flusher and flushes what is buffered, and returns the
// flush's error. A Writer never started prints nothing: Close releases any
// Write waiting for Start, which then drops its event.
func (w *Writer) Close() error {
	select {
	case <-w.started:
	default:
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.started)
		return nil
	}
	close(w.stop)
	<-w.flushed
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return w.w.Flush()
}
