package view

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/boottime"
	"github.com/procsupervisor/supervisor/internal/events"
)

// The events view: one compact line per event (time, kind, pid, ppid, uid,
// command line, exit code and duration on exit), or the JSON objects, for
// events read from the daemon's stream (api.StreamRecord lines) or from a
// local mechanism (events.Event), through the same filters.

// EventOptions are the events command's flags.
type EventOptions struct {
	JSON   bool
	Tokens bool
	Pid    int64
	Tree   int64
	Claim  string
	Kinds  string
	Comm   string
}

// EventFlags registers the options on fs and returns them.
func EventFlags(fs *flag.FlagSet) *EventOptions {
	o := &EventOptions{}
	fs.BoolVar(&o.JSON, "json", false, "one JSON object per line")
	fs.BoolVar(&o.Tokens, "tokens", false, "show each process's start token")
	fs.Int64Var(&o.Pid, "pid", 0, "only events of process `PID`")
	fs.Int64Var(&o.Tree, "tree", 0, "only events of process `PID` and of its descendants born from now on")
	fs.StringVar(&o.Claim, "claim", "", "only events of claim `ID` and of its processes (daemon only)")
	fs.StringVar(&o.Kinds, "kind", "", "only events of these kinds: `fork,exec,exit,lost,claim` (losses always come)")
	fs.StringVar(&o.Comm, "comm", "", "only events of processes whose comm is `NAME`")
	return o
}

// EventFilter decides which records are shown. It keeps state (--tree
// follows forks), so one filter serves one stream, from one goroutine.
type EventFilter struct {
	pid, tree int32
	claim     string
	kinds     map[string]bool // nil: every kind
	comm      string
	inTree    map[int32]bool
}

// all reports whether f lets every record through.
func (f *EventFilter) all() bool {
	return f.pid == 0 && f.tree == 0 && f.claim == "" && f.kinds == nil && f.comm == ""
}

// maxTree bounds the processes --tree follows.
const maxTree = 1 << 16

var eventKinds = []string{"fork", "exec", "exit", "lost", "claim"}

// Filter checks the options and returns their filter.
func (o *EventOptions) Filter() (*EventFilter, error) {
	f := &EventFilter{claim: o.Claim, comm: o.Comm}
	for _, p := range []struct {
		name string
		v    int64
		to   *int32
	}{{"pid", o.Pid, &f.pid}, {"tree", o.Tree, &f.tree}} {
		if p.v < 0 || p.v > 1<<22 {
			return nil, fmt.Errorf("--%s %d: not a process id", p.name, p.v)
		}
		*p.to = int32(p.v)
	}
	if len(f.comm) > 15 {
		f.comm = f.comm[:15] // the kernel keeps 15 bytes of a comm
	}
	if o.Kinds != "" {
		f.kinds = map[string]bool{}
		for k := range strings.SplitSeq(o.Kinds, ",") {
			k = strings.TrimSpace(k)
			if !containsString(eventKinds, k) {
				return nil, fmt.Errorf("--kind %q: want some of %s", k, strings.Join(eventKinds, ","))
			}
			f.kinds[k] = true
		}
	}
	if f.tree != 0 {
		f.inTree = map[int32]bool{f.tree: true}
	}
	return f, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// StreamKinds is what the daemon's stream needs to send for the filter:
// the kinds asked for, with forks and exits when --tree follows a tree
// (losses always come).
func (f *EventFilter) StreamKinds() api.StreamKinds {
	if f.kinds == nil {
		return 0
	}
	var names []string
	for _, k := range eventKinds {
		if f.kinds[k] || f.tree != 0 && (k == "fork" || k == "exit") {
			names = append(names, k)
		}
	}
	k, err := api.ParseStreamKinds(strings.Join(names, ","))
	if err != nil {
		return 0 // cannot happen: eventKinds are the stream's kinds
	}
	return k
}

// Local reports why the filter cannot work on a local mechanism, nil when
// it can: a local mechanism knows no claims.
func (f *EventFilter) Local() error {
	if f.claim != "" {
		return fmt.Errorf("--claim needs the daemon: a local mechanism knows no claims")
	}
	return nil
}

// Match reports whether r is shown, and follows --tree: a fork whose
// parent is followed is followed, an exit ends it. A loss is shown
// whatever the other filters say (it may hide what they would show).
func (f *EventFilter) Match(r *api.StreamRecord) bool {
	followed := f.follow(r)
	if r.Kind == "lost" { // losses always come, whatever the kinds asked
		return true
	}
	if f.kinds != nil && !f.kinds[r.Kind] {
		return false
	}
	switch {
	case f.pid != 0 && r.Pid != f.pid,
		f.tree != 0 && !followed,
		f.claim != "" && r.Claim != f.claim,
		f.comm != "" && (r.Kind == "claim" || r.Comm != f.comm):
		return false
	}
	return true
}

// follow updates the --tree set and reports whether r is of it.
func (f *EventFilter) follow(r *api.StreamRecord) bool {
	if f.inTree == nil || r.Kind == "lost" || r.Kind == "claim" {
		return f.inTree != nil && r.Kind == "claim" && f.inTree[r.Pid]
	}
	in := f.inTree[r.Pid]
	switch r.Kind {
	case "fork":
		if !in && f.inTree[r.PPid] && len(f.inTree) < maxTree {
			f.inTree[r.Pid], in = true, true
		}
	case "exit":
		if in && r.Pid != f.tree {
			delete(f.inTree, r.Pid)
		}
	}
	return in
}

// EventHeader is the header of the text view, without and with tokens.
const (
	EventHeader       = "TIME          KIND   PID      PPID     UID     COMMAND\n"
	EventHeaderTokens = "TIME          KIND   PID      PPID     UID     TOKEN                                                   COMMAND\n"
)

// AppendEvent appends r as one line of the text view, with its newline.
// Every string from a process or a user is sanitized. Exec shows argv
// when the record has it, else the executable, else the comm; exit shows
// the code or the signal, and the time since the fork when given
// (started is zero when the fork was not seen).
func AppendEvent(b []byte, r *api.StreamRecord, tokens bool, started time.Time) []byte {
	at := time.Now()
	if t, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
		at = t
	}
	b = at.Local().AppendFormat(b, "15:04:05.000")
	b = append(b, "  "...)
	b = padRight(b, Sanitize(r.Kind), 6)
	b = append(b, ' ')
	switch r.Kind {
	case "lost":
		b = append(b, "lost "...)
		b = strconv.AppendUint(b, r.Count, 10)
		b = append(b, " events ("...)
		b = append(b, Sanitize(r.Mechanism)...)
		if r.Mechanism == "stream" {
			b = append(b, ": this reader fell behind"...)
		}
		return append(b, ")\n"...)
	case "claim":
		return appendClaim(b, r)
	}
	b = padRight(b, strconv.FormatInt(int64(r.Pid), 10), 8)
	b = append(b, ' ')
	b = padRight(b, strconv.FormatInt(int64(r.PPid), 10), 8)
	b = append(b, ' ')
	uid := "-"
	if r.UID != nil {
		uid = strconv.FormatUint(uint64(*r.UID), 10)
	}
	b = padRight(b, uid, 7)
	b = append(b, ' ')
	if tokens {
		tok := r.Token
		if tok == "" {
			tok = "-"
		}
		b = padRight(b, Sanitize(tok), 55)
		b = append(b, ' ')
	}
	switch {
	case r.Kind == "exec" && len(r.Argv) > 0:
		for i, a := range r.Argv {
			if i > 0 {
				b = append(b, ' ')
			}
			b = appendArg(b, a)
		}
	case r.Kind == "exec" && r.Exe != "":
		b = appendArg(b, r.Exe)
	default:
		b = append(b, Sanitize(r.Comm)...)
	}
	if r.Kind == "exit" {
		switch {
		case r.ExitCode != nil:
			b = append(b, "  exit "...)
			b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
		case r.Signal != 0:
			b = append(b, "  signal "...)
			b = strconv.AppendInt(b, int64(r.Signal), 10)
		}
		if !started.IsZero() && !at.Before(started) {
			b = append(b, " after "...)
			b = append(b, roundDuration(at.Sub(started)).String()...)
		}
	}
	if r.Claim != "" {
		b = append(b, "  ["...)
		b = append(b, Sanitize(r.Claim)...)
		b = append(b, ']')
	}
	if r.Inferred {
		b = append(b, " (inferred)"...)
	}
	return append(b, '\n')
}

// roundDuration keeps three significant digits or so: 1.234s, 12.345ms, 87µs.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d
}

func appendClaim(b []byte, r *api.StreamRecord) []byte {
	b = append(b, Sanitize(r.Claim)...)
	b = append(b, ' ')
	b = append(b, Sanitize(strings.ReplaceAll(r.Action, "_", " "))...)
	if r.From != "" || r.State != "" {
		b = append(b, ": "...)
		b = append(b, Sanitize(r.From)...)
		b = append(b, " -> "...)
		b = append(b, Sanitize(r.State)...)
	}
	if r.ExitCode != nil {
		b = append(b, " exit "...)
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	} else if r.Signal != 0 {
		b = append(b, " signal "...)
		b = strconv.AppendInt(b, int64(r.Signal), 10)
	}
	if r.Reason != "" {
		b = append(b, " ("...)
		b = append(b, Sanitize(r.Reason)...)
		b = append(b, ')')
	}
	if r.UID != nil {
		b = append(b, " uid "...)
		b = strconv.AppendUint(b, uint64(*r.UID), 10)
	}
	if r.Owner != "" {
		b = append(b, " owner "...)
		b = append(b, Sanitize(r.Owner)...)
	}
	return append(b, '\n')
}

// appendArg appends one argument sanitized, quoted when it is empty or
// holds a space or a quote (Sanitize leaves no space but ' ').
func appendArg(b []byte, a string) []byte {
	a = Sanitize(a)
	if a != "" && !strings.ContainsAny(a, " '\"\\") {
		return append(b, a...)
	}
	return append(b, Sanitize(strconv.Quote(a))...)
}

func padRight(b []byte, s string, w int) []byte {
	b = append(b, s...)
	for i := len(s); i < w; i++ {
		b = append(b, ' ')
	}
	return b
}

// Record fills r from a local mechanism's event, as the daemon would
// stream it (without claim, which a local mechanism does not know). Argv
// is rendered as soon as a mechanism fills it; the uid is the real uid of
// the exec context, when the mechanism captured one. wall is the event's
// time (boottime.Clock.At of its stamp).
func Record(r *api.StreamRecord, ev *events.Event, wall time.Time) {
	*r = api.StreamRecord{Kind: ev.Kind.String(), Mechanism: string(ev.Mechanism), Time: wall.UTC().Format(time.RFC3339Nano),
		Pid: ev.Pid, PPid: ev.PPid, Comm: ev.CommString(), Exe: ev.Exe, Argv: ev.Argv, Count: ev.Count, Inferred: ev.Inferred}
	if ev.Kind == events.Exec && ev.Tid != ev.Pid {
		r.Tid = ev.Tid
	}
	if ev.Ctx.Has(events.CtxIDs) {
		uid := ev.Ctx.UID
		r.UID = &uid
	}
	if !ev.Token.IsZero() {
		r.Token = ev.Token.String()
	}
	if !ev.ParentToken.IsZero() {
		r.Parent = ev.ParentToken.String()
	}
	if ev.Kind == events.Exit {
		if code, ok := ev.Exited(); ok {
			r.ExitCode = &code
		} else if sig, ok := ev.Signaled(); ok {
			r.Signal = sig
		}
	}
}

// EventPrinter prints the records that pass its filter, text or JSON,
// into a buffer flushed events.FlushEvery after the first line written
// since the last flush, once started, and on Close: a printer with
// nothing to print does not wake (a free-running ticker woke it ten times
// a second). The text header is written first, when the printer is made;
// nothing is flushed before Start, so that a command that fails before
// it streams prints nothing (Abort). Event and Line may be called from
// any goroutine, before Start too.
type EventPrinter struct {
	opt     EventOptions
	stop    chan struct{}
	done    chan struct{}
	dirty   chan struct{} // a flush is due: the first line since the last
	started bool

	mu  sync.Mutex
	f   *EventFilter
	w   *bufio.Writer
	out io.Writer
	buf []byte
	enc events.Encoder
	// width is the terminal's width in columns when out is a terminal
	// (tty), which text cuts each line to; 0 when it is not.
	width  int
	tty    bool
	rec    api.StreamRecord
	forks  map[int32]time.Time // fork times of live processes, for durations
	clock  boottime.Clock      // the wall time of a local mechanism's events
	armed  bool                // a flush is due (dirty was sent)
	closed bool
}

// printBuffer is the output buffer, written when full and every
// events.FlushEvery. Under an exec storm with 4 KiB argument vectors a 64
// KiB buffer was a write every 1.5 ms; each write wakes the Go runtime's
// sysmon thread to its 20 µs tick, which cost more than the write (2.4 µs
// of the 17 µs per exec; 1.1 µs with 1 MiB). A regular file on a local
// filesystem, a pipe or a socket is written raw while it has room
// (quietfile, see the events command), which wakes nothing.
const printBuffer = 1 << 20

// maxForks bounds the fork times kept for exit durations.
const maxForks = 1 << 16

// NewEventPrinter returns a printer of the records o selects, to w. It
// fails when o is not valid.
func NewEventPrinter(w io.Writer, o EventOptions) (*EventPrinter, error) {
	f, err := o.Filter()
	if err != nil {
		return nil, err
	}
	p := &EventPrinter{opt: o, f: f, out: w, w: bufio.NewWriterSize(w, printBuffer), forks: map[int32]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{}), dirty: make(chan struct{}, 1)}
	if !o.JSON {
		p.width = Width(w)
		p.tty = p.width > 0
		h := EventHeader
		if o.Tokens {
			h = EventHeaderTokens
		}
		p.write(cutLine([]byte(h), p.width))
	}
	return p, nil
}

// Start starts flushing: call it once the stream is open. Close stops it.
func (p *EventPrinter) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	go p.flushLoop()
}

// Filter returns the printer's filter.
func (p *EventPrinter) Filter() *EventFilter { return p.f }

func (p *EventPrinter) flushLoop() {
	defer close(p.done)
	t := time.NewTimer(events.FlushEvery)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.dirty:
			t.Reset(events.FlushEvery)
		case <-t.C:
			p.mu.Lock()
			p.w.Flush()
			p.armed = false
			p.mu.Unlock()
		}
	}
}

// write buffers b and, for the first line since the last flush, has the
// flusher flush events.FlushEvery later. p.mu is held.
func (p *EventPrinter) write(b []byte) error {
	_, err := p.w.Write(b)
	if !p.armed {
		p.armed = true
		select {
		case p.dirty <- struct{}{}:
		default: // one is pending: the flush it asks for is still due
		}
	}
	return err
}

// Event prints a local mechanism's event.
func (p *EventPrinter) Event(ev *events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wall := p.clock.At(ev.Time)
	if p.opt.JSON && p.f.all() {
		// Unfiltered JSON needs no record: the event's own encoding,
		// without an allocation.
		if !p.closed {
			p.buf = append(p.enc.AppendJSONTime(p.buf[:0], ev, 0, wall), '\n')
			p.write(p.buf)
		}
		return
	}
	Record(&p.rec, ev, wall)
	if !p.show() {
		return
	}
	if p.opt.JSON {
		p.buf = append(p.enc.AppendJSONTime(p.buf[:0], ev, 0, wall), '\n')
	} else {
		p.buf = p.text(p.buf[:0])
	}
	p.write(p.buf)
}

// Line prints one record of the daemon's stream; in JSON, the line as it
// came. A line that is not a record is an error.
func (p *EventPrinter) Line(line []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rec = api.StreamRecord{}
	if err := json.Unmarshal(line, &p.rec); err != nil {
		return fmt.Errorf("event stream: malformed record: %w", err)
	}
	if !p.show() {
		return nil
	}
	if p.opt.JSON {
		p.buf = append(append(p.buf[:0], line...), '\n')
	} else {
		p.buf = p.text(p.buf[:0])
	}
	return p.write(p.buf)
}

// show runs the filter on p.rec and keeps fork times. p.mu is held.
func (p *EventPrinter) show() bool {
	if p.closed {
		return false
	}
	return p.f.Match(&p.rec)
}

// text renders p.rec, cut to the terminal's width when out is one. The
// width is read again for the first line since the last flush (a
// TIOCGWINSZ every events.FlushEvery at most, not one a line): a line
// written just after the terminal narrowed may still wrap. p.mu is held.
func (p *EventPrinter) text(b []byte) []byte {
	if p.tty && !p.armed {
		if w := Width(p.out); w > 0 {
			p.width = w
		}
	}
	r := &p.rec
	var started time.Time
	switch r.Kind {
	case "fork":
		if len(p.forks) >= maxForks {
			clear(p.forks)
		}
		if t, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
			p.forks[r.Pid] = t
		}
	case "exit":
		started = p.forks[r.Pid]
		delete(p.forks, r.Pid)
	}
	return cutLine(AppendEvent(b, r, p.opt.Tokens, started), p.width)
}

// cutLine cuts the line b (with its newline) to width columns, as Cut
// does, in place; width 0 leaves it whole.
func cutLine(b []byte, width int) []byte {
	if width <= 0 || len(b) == 0 {
		return b
	}
	body := b[:len(b)-1]
	i, whole := cutAt(unsafe.String(unsafe.SliceData(body), len(body)), width)
	if whole {
		return b
	}
	b = b[:i]
	if width >= 2 {
		b = append(b, cutMark...)
	}
	return append(b, '\n')
}

// Close stops the flusher, flushes and returns the flush's error; later
// events are dropped.
func (p *EventPrinter) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	started := p.started
	p.mu.Unlock()
	if started {
		close(p.stop)
		<-p.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Flush()
}

// Abort drops what is not yet flushed (the header when nothing was
// printed) and closes the printer.
func (p *EventPrinter) Abort() {
	p.mu.Lock()
	p.w.Reset(p.out)
	p.mu.Unlock()
	p.Close()
}

// LineReader is a stream of records, one line each (*api.EventStream).
type LineReader interface {
	Next() ([]byte, error)
	Close() error
}

// Copy starts the printer and prints the records of st until ctx ends
// (nil) or st fails (its error). It closes st.
func (p *EventPrinter) Copy(ctx context.Context, st LineReader) error {
	p.Start()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	defer st.Close()
	for {
		line, err := st.Next()
		if err == nil {
			err = p.Line(line)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
