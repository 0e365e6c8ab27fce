// Package logfeed writes the supervisor's JSON log feed for a SIEM: one
// line per process event (of the kinds chosen), verdict, signal, teardown,
// reconcile and loss, named after the Elastic Common Schema (ECS) or, on
// request, as OCSF Process Activity (class_uid 1007) events.
//
// Mechanism. A line is encoded with zerolog on the caller's goroutine into
// a pooled buffer and appended to a bounded batch of lines (at most
// BufferLines lines and 16 MiB, in an anonymous mapping outside the Go
// heap whose pages go back to the kernel when the feed has been quiet for a
// minute: arena.go);
// one drain goroutine, owned by the Logger, is woken when the batch stops
// being empty, lets it fill for 100 ms, or a second while it holds process
// events only (less when it passes 2 MiB, or on Flush, Close or Reopen),
// swaps it for its spare and hands it whole to
// the sink (stdout or a size-rotated file: one write per batch; syslog in
// RFC 5424 form over a unix socket, UDP or TCP: a message per line).
// Under a storm of process events that is one wake-up and one write per
// batch, not per line. The caller never waits
// for the sink: when the batch is full, or the sink fails, the line is
// dropped and counted, and the count is written as a line of its own
// (event.action "log_lines_dropped") as soon as a later write succeeds.
// Process events give way: in a full batch an audit, verdict, signal or
// other line takes the place of a process event, so only process events
// are dropped to make room (Drops counts each class), and among them the
// uid with the most in the batch loses its newest first, so that one
// user's storm cannot push another's lines out (queue.evict). Encoding a
// process event allocates nothing in the steady state.
//
// Limits. A line dropped is gone: the feed is a best-effort mirror of the
// supervisor's decisions, not their record (the store is). Long argument
// vectors are cut to Config.ArgsBytes, and the line says so as it does for the
// kernel's cut (supervisor.args_truncated, args_size; process.args_count
// still says how many there were). Wall-clock times of events and process
// starts are derived from CLOCK_BOOTTIME and the boot-time offset, sampled
// at most every few seconds, so a step of the wall clock shows up in the
// feed a little late.
//
// ECS choices. ecs.version is "8.11.0", a released ECS version that has every
// field used here (host.boot.id is still beta in it); the schema test checks
// the lines against the generated definitions of ECS 9.5.0-dev kept in
// testdata/ecs. Every line has event.kind "event": each one records
// something that happened ("alert" is for detections by a rule, "state" for
// periodic snapshots, "signal" is reserved for Kibana). Supervisor-specific
// data lives under the top-level name "supervisor", following the ECS
// guidance on custom fields to nest them under a proper name, which ECS
// itself never uses for a field set.
package logfeed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/userdb"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// ErrConfig wraps every error about a Config that cannot work.
var ErrConfig = errors.New("invalid log feed configuration")

// ErrClosed is returned by Close when the Logger was already closed.
var ErrClosed = errors.New("log feed closed")

// ECSVersion is the value of ecs.version on every ECS line.
const ECSVersion = "8.11.0"

// OCSFVersion is the value of metadata.version on every OCSF line.
const OCSFVersion = "1.3.0"

// Schemas.
const (
	SchemaECS  = "ecs"
	SchemaOCSF = "ocsf"
)

// Defaults.
const (
	DefaultBufferLines  = 4096
	DefaultMaxFileBytes = 100 << 20
	DefaultMaxBackups   = 5
	// DefaultArgsBytes bounds the bytes of process.args (and of
	// command_line) in one line when Config.ArgsBytes is 0: the eBPF
	// source's default capture bound, so that a line cuts nothing the
	// kernel gave whole.
	DefaultArgsBytes = 32 << 10
	// MaxArgsBytes is the largest Config.ArgsBytes, the eBPF source's
	// largest capture bound.
	MaxArgsBytes = 1 << 20
)

// Config says what the feed writes and where.
type Config struct {
	// Schema is SchemaECS (the default when empty) or SchemaOCSF.
	Schema string
	// Output is "stdout" (the default when empty), "file:PATH", "syslog"
	// (the local socket /dev/log), "syslog:/path/to/socket",
	// "syslog:udp://host:port" or "syslog:tcp://host:port". See ParseOutput.
	Output string
	// Writer, when not nil, receives the lines instead of Output (tests,
	// embedding). The Logger never closes it.
	Writer io.Writer
	// MaxFileBytes rotates a file output when it would grow past this size
	// (DefaultMaxFileBytes when 0; negative disables rotation).
	MaxFileBytes int64
	// MaxBackups is how many rotated files (PATH.1 ... PATH.N) are kept
	// (DefaultMaxBackups when 0; negative keeps none).
	MaxBackups int
	// BufferLines bounds the lines waiting for the sink (DefaultBufferLines
	// when 0).
	BufferLines int
	// ProcessEvents are the kinds of process events (fork, exec, exit)
	// that get a line each; none when zero. Losses are always logged.
	ProcessEvents Kinds
	// Hostname is host.hostname (os.Hostname when empty).
	Hostname string
	// Boot is host.boot.id (read from /proc when zero, on Linux).
	Boot procfs.BootID
	// Version is the supervisor's version, logged in service.version.
	Version string
	// ArgsBytes bounds the argument bytes a process line writes, in
	// process.args and again in command_line (0: DefaultArgsBytes; at
	// most MaxArgsBytes). The daemon passes its capture bound. A line
	// that cuts says so (supervisor.args_truncated, args_size).
	ArgsBytes int
	// UserBytes bounds the bytes a second of process lines that one
	// user's processes (by real uid; root's are not bounded) put in the
	// feed with their arguments (0: DefaultUserBytes; negative: no
	// bound). Past it, while that user's share is spent, its lines keep
	// the first KiB of the process's arguments and of its parent's,
	// marked supervisor.args_withheld with the count and size, and the
	// end of a long path. See shares.
	UserBytes int64
	// ShareOf, when set, returns the user whose share a uid's lines count
	// against (the daemon: the owner of a subordinate uid by /etc/subuid,
	// else the uid), asked once per uid.
	ShareOf func(uid uint32) uint32
	// Names names the users and groups of process lines (userdb.Local,
	// /etc/passwd and /etc/group, when nil).
	Names *userdb.DB
	// OnSinkState, when not nil, is called from the feed's goroutine when
	// its output starts failing (with the error) and when it takes lines
	// again (with nil), once for each change: a feed cannot tell its own
	// reader that it is dropping lines.
	OnSinkState func(err error)
}

// Stats counts lines.
type Stats struct {
	Written       uint64 // lines the sink accepted
	Dropped       uint64 // lines lost: buffer full, sink failure, or after Close
	DroppedBy     Drops  // Dropped by class
	DropReports   uint64 // log_lines_dropped lines written
	Reopens       uint64 // successful reopens of a file or socket
	ArgsWithheld  uint64 // process lines written without their arguments (Config.UserBytes)
	LastSinkError string // last error from the sink, "" when none
}

// Logger writes the log feed. It is safe for concurrent use; Close it to
// flush and stop its goroutine.
type Logger struct {
	enc    encoder
	kinds  Kinds // process event kinds written (Config.ProcessEvents)
	q      *queue
	done   chan struct{} // closed when the drain goroutine ends
	closed atomic.Bool
	pool   sync.Pool // *capture
	shares *shares   // nil: process lines are not metered by user
}

// encoder renders the lines of one schema.
type encoder interface {
	event(c *capture, ev *events.Event)
	verdict(c *capture, v *verdict.Verdict)
	signal(c *capture, s *Signal)
	teardown(c *capture, o *actions.Outcome)
	reconcile(c *capture, r *Reconcile)
	lost(c *capture, mech events.Mechanism, count uint64)
	dropped(c *capture, d Drops, top []uidDrops)
	service(c *capture, s *Service)
	internal(c *capture, msg string, stack []byte)
	request(c *capture, r *Request)
	claim(c *capture, ev *ClaimEvent)
}

// New builds a Logger and starts its drain goroutine. Errors wrap ErrConfig
// for a bad Config, or the error of opening the output.
func New(cfg Config) (*Logger, error) {
	if cfg.BufferLines == 0 {
		cfg.BufferLines = DefaultBufferLines
	}
	if cfg.BufferLines < 0 {
		return nil, fmt.Errorf("buffer of %d lines: %w", cfg.BufferLines, ErrConfig)
	}
	if cfg.ProcessEvents&^AllKinds != 0 {
		return nil, fmt.Errorf("process event kinds %v: %w", cfg.ProcessEvents, ErrConfig)
	}
	if cfg.ArgsBytes == 0 {
		cfg.ArgsBytes = DefaultArgsBytes
	}
	if cfg.ArgsBytes < 0 || cfg.ArgsBytes > MaxArgsBytes {
		return nil, fmt.Errorf("%d argument bytes a line: want 1 to %d: %w", cfg.ArgsBytes, MaxArgsBytes, ErrConfig)
	}
	if cfg.UserBytes > MaxUserBytes {
		return nil, fmt.Errorf("%d bytes a second a user: want at most %d (negative: no bound): %w", cfg.UserBytes, int64(MaxUserBytes), ErrConfig)
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.MaxBackups == 0 {
		cfg.MaxBackups = DefaultMaxBackups
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.Boot == (procfs.BootID{}) {
		cfg.Boot = readBootID()
	}
	if cfg.Names == nil {
		cfg.Names = userdb.Local()
	}
	h := newHost(cfg)
	var enc encoder
	switch cfg.Schema {
	case "", SchemaECS:
		enc = newECS(h)
	case SchemaOCSF:
		enc = newOCSF(h)
	default:
		return nil, fmt.Errorf("schema %q (want %q or %q): %w", cfg.Schema, SchemaECS, SchemaOCSF, ErrConfig)
	}
	var s sink
	if cfg.Writer != nil {
		s = newStreamSink(cfg.Writer, nil)
	} else {
		out, err := ParseOutput(cfg.Output)
		if err != nil {
			return nil, err
		}
		if s, err = openSink(out, cfg, h.hostname); err != nil {
			return nil, err
		}
	}
	l := &Logger{enc: enc, kinds: cfg.ProcessEvents, done: make(chan struct{}), shares: newShares(cfg.UserBytes, cfg.ShareOf)}
	l.q = newQueue(cfg.BufferLines, s, l.encodeDropped)
	l.q.onSink = cfg.OnSinkState
	l.pool.New = func() any { return &capture{l: l} }
	go func() {
		defer close(l.done)
		l.q.drain()
	}()
	return l, nil
}

// Reopen asks the drain goroutine to reopen a file output (after logrotate
// moved it) or reconnect a syslog socket. It does not wait. Call it on
// SIGHUP (see ReopenOn).
func (l *Logger) Reopen() { l.q.requestReopen() }

// Flush waits until every line logged before the call has been written
// to the output (or dropped), or until ctx ends. The batch holding them is
// written without lingering, whatever the load.
func (l *Logger) Flush(ctx context.Context) error {
	return l.q.flush(ctx)
}

// Close stops accepting lines, waits until the buffered lines are written
// or ctx ends, then closes the output it opened (never Config.Writer). When
// ctx ends first, the lines still buffered are dropped and the drain
// goroutine ends as soon as the sink returns from its current write; Close
// then returns ctx's error.
func (l *Logger) Close(ctx context.Context) error {
	if !l.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	l.q.close()
	select {
	case <-l.done:
		return l.q.closeSink()
	case <-ctx.Done():
		l.q.abandon()
		err := l.q.closeSink()
		return errors.Join(fmt.Errorf("closing log feed: %w", ctx.Err()), err)
	}
}

// Stats returns the line counters.
func (l *Logger) Stats() Stats {
	s := l.q.stats()
	s.ArgsWithheld = l.shares.Withheld()
	return s
}

// capture is the zerolog writer of one line: it copies the encoded line
// into the queue together with what the sink needs to know about it, or,
// for the drain goroutine's own lines, into dst.
type capture struct {
	l       *Logger
	sev     severity
	action  string
	dst     []byte
	direct  bool     // append to dst instead of queueing
	scratch []byte   // reused by encoders (OCSF cmd_line)
	esc     []byte   // a zerolog line with its line breaks escaped (Write)
	proc    procLine // the ECS process line (ecsevent.go)
	n       int      // bytes of the line last written
	// held and heldParent are a process event and its parent's
	// description trimmed for a user over its share (trim), and cut the
	// line's argument bytes then (0: Config.ArgsBytes).
	held       events.Event
	heldParent events.Desc
	cut        int
	claim      string // the claim a verdict, signal or teardown line is for
	class      class
	uid        uint32 // a process event's real uid (noUID: none), for fair drops
}

// Write implements io.Writer for zerolog: the line, with the characters
// zerolog leaves raw that some collectors split lines at written as
// escapes (escapeLineBreaks).
func (c *capture) Write(p []byte) (int, error) {
	q := escapeLineBreaks(c.esc[:0], p)
	if len(q) != len(p) && cap(q) <= maxKeptEscaped {
		c.esc = q[:0]
	}
	c.write(q)
	return len(p), nil
}

// maxKeptEscaped bounds the buffer a pooled capture keeps for escaped
// lines (a longer one is left to the collector).
const maxKeptEscaped = 64 << 10

// write queues the line p (or appends it to dst).
func (c *capture) write(p []byte) {
	c.n = len(p)
	if c.direct {
		c.dst = append(c.dst, p...)
		return
	}
	c.l.q.put(p, c.sev, c.action, c.class, c.uid)
}

// WriteLevel implements zerolog.LevelWriter, so that zerolog does not wrap
// (and allocate) an adapter per line.
func (c *capture) WriteLevel(_ zerolog.Level, p []byte) (int, error) { return c.Write(p) }

func (l *Logger) get(action string, sev severity) *capture {
	c := l.pool.Get().(*capture)
	c.action, c.sev, c.claim, c.class, c.uid = action, sev, "", classOf(action), noUID
	return c
}

func (l *Logger) put(c *capture) { l.pool.Put(c) }

// severity is the syslog severity of a line.
type severity uint8

const (
	sevError   severity = 3
	sevWarning severity = 4
	sevNotice  severity = 5
	sevInfo    severity = 6
)

// ReopenOnSignal calls Reopen whenever one of sigs arrives (typically
// syscall.SIGHUP, sent by logrotate's postrotate). Its goroutine ends when
// ctx ends or the Logger's drain goroutine has ended.
func (l *Logger) ReopenOnSignal(ctx context.Context, sigs ...os.Signal) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ch:
				l.Reopen()
			case <-ctx.Done():
				return
			case <-l.done:
				return
			}
		}
	}()
}
