package fallback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// PSArgs are the arguments ps runs with: every process, unlimited width,
// fixed columns without headers, the only free-form column (args) last. Both
// procps-ng and the BSD ps of macOS accept them.
var PSArgs = []string{"-A", "-ww", "-o", "pid=,ppid=,stat=,lstart=,args="}

// PSEnv is the default environment of ps: the C locale (English day and
// month names in lstart) and UTC, so lstart has no daylight-saving
// ambiguity.
var PSEnv = []string{"LC_ALL=C", "TZ=UTC0", "PATH=/usr/bin:/bin"}

// PSOptions configure a PS snapshotter. Zero fields take the defaults.
type PSOptions struct {
	// Path is the ps binary; default the first of /bin/ps and /usr/bin/ps
	// that exists.
	Path string
	// Timeout bounds one run; default 30 s (one ps run over 10,000
	// processes took more than 5 s on a busy 2-core machine).
	Timeout time.Duration
	// MaxOutput bounds what ps may write to stdout; default 64 MiB.
	MaxOutput int
	// Env replaces PSEnv. It should set LC_ALL=C; Location must name the
	// time zone it gives ps.
	Env []string
	// Location is the time zone lstart is printed in; default UTC (PSEnv).
	Location *time.Location
	// Self is the pid the table must contain; default os.Getpid().
	Self int32
	// Boot is the boot identity for tokens; default the host's (Linux boot
	// id, macOS see HostBoot).
	Boot *procfs.BootID
	// ProcRoot is where /proc is on Linux, for the boot time that converts
	// ticks tokens; default "/proc". Ignored where it does not exist.
	ProcRoot string
}

// PS snapshots the process table by running ps(1).
type PS struct {
	opts PSOptions
	seq  atomic.Uint64

	bootOnce sync.Once
	boot     procfs.BootID
	bootErr  error
}

// NewPS returns a ps snapshotter. It runs nothing until Snapshot.
func NewPS(opts PSOptions) *PS {
	if opts.Path == "" {
		opts.Path = "/usr/bin/ps"
		if _, err := os.Stat("/bin/ps"); err == nil {
			opts.Path = "/bin/ps"
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = 64 << 20
	}
	if opts.Env == nil {
		opts.Env = PSEnv
	}
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	if opts.Self == 0 {
		opts.Self = int32(os.Getpid())
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	return &PS{opts: opts}
}

// Mechanism returns events.PSPoll.
func (p *PS) Mechanism() events.Mechanism { return events.PSPoll }

func (p *PS) bootID() (procfs.BootID, error) {
	p.bootOnce.Do(func() {
		if p.opts.Boot != nil {
			p.boot = *p.opts.Boot
			return
		}
		p.boot, p.bootErr = HostBoot()
	})
	return p.boot, p.bootErr
}

// Snapshot runs ps once and parses its table. Errors wrap ErrPSFailed,
// ErrOutputTooLarge or ErrImplausibleTable; on error there is no snapshot.
// Besides pid 1 and Self, the table must list the ps process itself as a
// child of Self; that row is then removed (ps has exited).
func (p *PS) Snapshot(ctx context.Context) (*Snapshot, error) {
	seq := p.seq.Add(1)
	boot, err := p.bootID()
	if err != nil {
		return nil, fmt.Errorf("ps: boot identity: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.opts.Path, PSArgs...)
	cmd.Env = p.opts.Env
	cmd.WaitDelay = time.Second
	stdout := &capWriter{max: p.opts.MaxOutput, overflow: cancel}
	stderr := &capWriter{max: 4096}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	taken := time.Now()
	runErr := cmd.Run()
	switch {
	case stdout.over:
		return nil, fmt.Errorf("ps: more than %d bytes: %w", p.opts.MaxOutput, ErrOutputTooLarge)
	case ctx.Err() != nil && runErr != nil:
		return nil, fmt.Errorf("ps: no table after %v: %w", p.opts.Timeout, errors.Join(ErrPSFailed, ctx.Err()))
	case runErr != nil:
		msg := bytes.TrimSpace(stderr.buf)
		return nil, fmt.Errorf("ps: %w: %s: %w", runErr, msg, ErrPSFailed)
	}
	s, err := ParsePS(stdout.buf, ParseOptions{Boot: boot, Location: p.opts.Location, Self: p.opts.Self})
	if err != nil {
		return nil, fmt.Errorf("ps: %w", err)
	}
	psPid := int32(cmd.Process.Pid)
	e := s.Lookup(psPid)
	if e == nil || e.PPid != p.opts.Self {
		return nil, fmt.Errorf("ps: the table does not list ps itself (pid %d): %w", psPid, ErrImplausibleTable)
	}
	// ps has exited by now: drop its row, so that polls do not report the
	// poller's own ps runs as forks and exits.
	if e.Partial() {
		s.Partial--
	}
	s.Entries = slices.DeleteFunc(s.Entries, func(e Entry) bool { return e.Pid == psPid })
	s.Seq, s.Taken = seq, taken
	s.BootTime, _ = ReadBootTime(p.opts.ProcRoot) // Linux only; 0 elsewhere
	return s, nil
}

// capWriter keeps at most max bytes and reports overflow once.
type capWriter struct {
	buf      []byte
	max      int
	over     bool
	overflow func()
}

func (w *capWriter) Write(b []byte) (int, error) {
	if len(w.buf)+len(b) > w.max {
		if w.overflow != nil {
			w.over = true
			w.overflow()
			return 0, ErrOutputTooLarge
		}
		b = b[:w.max-len(w.buf)] // stderr: keep the head, drop the rest
	}
	w.buf = append(w.buf, b...)
	return len(b), nil
}

// ParseOptions say how to read a ps table.
type ParseOptions struct {
	Boot     procfs.BootID
	Location *time.Location // lstart's time zone; nil means UTC
	Self     int32          // the pid that must be present besides pid 1
}

// ParsePS parses the output of ps run with PSArgs. Every non-empty line must
// be a row that begins with a pid and a ppid; a row whose state or start
// time does not parse becomes a Partial entry (the pid is held, by whom is
// unknown). Errors wrap ErrImplausibleTable. The returned snapshot has no Seq
// or Taken.
func ParsePS(out []byte, o ParseOptions) (*Snapshot, error) {
	loc := o.Location
	if loc == nil {
		loc = time.UTC
	}
	s := &Snapshot{Mechanism: events.PSPoll, Boot: o.Boot, Self: o.Self}
	s.Entries = make([]Entry, 0, bytes.Count(out, []byte{'\n'})+1)
	for n := 1; len(out) > 0; n++ {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		e, ok := parseRow(line, o.Boot, loc)
		if !ok {
			return nil, fmt.Errorf("line %d is not a process row (an argument with a newline, or a forged row): %w", n, ErrImplausibleTable)
		}
		s.Entries = append(s.Entries, e)
	}
	if err := s.finish(); err != nil {
		return nil, err
	}
	return s, nil
}

// parseRow parses one row. ok is false when the line does not begin with a
// pid and a ppid.
func parseRow(line []byte, boot procfs.BootID, loc *time.Location) (e Entry, ok bool) {
	var f []byte
	f, line = nextField(line)
	pid, ok := atoi32(f)
	if !ok || pid <= 0 {
		return e, false
	}
	f, line = nextField(line)
	ppid, ok := atoi32(f)
	if !ok || ppid < 0 {
		return e, false
	}
	e.Pid, e.PPid = pid, ppid
	// From here a failure leaves a partial entry: the pid is held.
	f, line = nextField(line)
	if len(f) == 0 || f[0] < 'A' || f[0] > 'Z' {
		return e, true
	}
	state := f[0]
	var lstart [5][]byte
	for i := range lstart {
		lstart[i], line = nextField(line)
	}
	sec, ok := parseLstart(lstart, loc)
	if !ok {
		return e, true
	}
	e.State = state
	e.Token = token.Token{Boot: boot, Start: uint64(sec), Prec: token.Second}
	e.Args = string(bytes.TrimRight(bytes.TrimLeft(line, " \t"), "\r"))
	setComm(&e.Comm, commFromArgs(e.Args))
	return e, true
}

// nextField returns the next blank-separated field and the rest.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}

var (
	weekdays = [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	months   = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// parseLstart parses "Sun Nov 29 16:06:24 2026" (C locale, asctime form) in
// loc and returns Unix seconds. The weekday must agree with the date.
func parseLstart(f [5][]byte, loc *time.Location) (int64, bool) {
	wd := -1
	for i, w := range weekdays {
		if string(f[0]) == w {
			wd = i
		}
	}
	mon := -1
	for i, m := range months {
		if string(f[1]) == m {
			mon = i + 1
		}
	}
	day, ok1 := atoi32(f[2])
	year, ok2 := atoi32(f[4])
	if wd < 0 || mon < 0 || !ok1 || !ok2 || day < 1 || day > 31 || year < 1970 || year > 9999 || len(f[3]) != 8 || f[3][2] != ':' || f[3][5] != ':' {
		return 0, false
	}
	h, ok1 := atoi32(f[3][0:2])
	m, ok2 := atoi32(f[3][3:5])
	s, ok3 := atoi32(f[3][6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || s > 60 {
		return 0, false
	}
	t := time.Date(int(year), time.Month(mon), int(day), int(h), int(m), int(s), 0, loc)
	if t.Day() != int(day) || int(t.Weekday()) != wd || t.Unix() < 0 {
		return 0, false
	}
	return t.Unix(), true
}

// commFromArgs guesses the process name from what ps printed: "[name]" for
// kernel threads and zombies on Linux, "(name)" when macOS ps could not read
// the arguments, otherwise the base name of the first word.
func commFromArgs(args string) string {
	if len(args) > 1 && (args[0] == '[' || args[0] == '(') {
		closer := byte(']')
		if args[0] == '(' {
			closer = ')'
		}
		for i := 1; i < len(args); i++ {
			if args[i] == closer {
				return args[1:i]
			}
		}
	}
	first := args
	for i := 0; i < len(args); i++ {
		if args[i] == ' ' {
			first = args[:i]
			break
		}
	}
	if first == "" || first == "<defunct>" {
		return ""
	}
	return path.Base(first)
}

// atoi32 parses canonical unsigned decimal that fits an int32.
func atoi32(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil || b[0] == '+' || b[0] == '-' {
		return 0, false
	}
	return int32(v), true
}
