package logfeed

import (
	"bytes"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/boottime"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/userdb"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// host is what every line says about where it comes from.
type host struct {
	hostname string
	boot     string // boot id as a UUID, "" when unknown
	version  string
	pid      int
	clock    boottime.Clock
	names    *userdb.DB
	argsMax  int // Config.ArgsBytes
}

func newHost(cfg Config) *host {
	h := &host{hostname: cfg.Hostname, version: cfg.Version, pid: os.Getpid(), names: cfg.Names, argsMax: cfg.ArgsBytes}
	if h.argsMax == 0 {
		h.argsMax = DefaultArgsBytes
	}
	if cfg.Boot != (procfs.BootID{}) {
		h.boot = uuid(cfg.Boot)
	}
	return h
}

// uuid formats a boot id as /proc/sys/kernel/random/boot_id shows it.
func uuid(b procfs.BootID) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

// Values of event.category and event.type; package variables so that
// passing them to zerolog allocates nothing.
var (
	catProcess = []string{"process"}
	typeStart  = []string{"start"}
	typeEnd    = []string{"end"}
	typeChange = []string{"change"}
	typeInfo   = []string{"info"}
)

// ecs encodes lines with Elastic Common Schema names, as nested objects.
type ecs struct {
	h        *host
	ecsJSON  []byte // {"version":...}
	hostJSON []byte // {"hostname":...,"boot":{"id":...}}
	svcJSON  []byte // {"name":"supervisor",...}
	// prefixFork, prefixExec and prefixExit are a process line from
	// "ecs" to "event" (procPrefix).
	prefixFork, prefixExec, prefixExit []byte
}

func newECS(h *host) *ecs {
	x := &ecs{h: h}
	x.ecsJSON = rawObject(func(e *zerolog.Event) { e.Str("version", ECSVersion) })
	x.hostJSON = rawObject(func(e *zerolog.Event) {
		if h.hostname != "" {
			e.Str("hostname", h.hostname).Str("name", h.hostname)
		}
		if h.boot != "" {
			e.Dict("boot", e.CreateDict().Str("id", h.boot))
		}
	})
	x.svcJSON = rawObject(func(e *zerolog.Event) {
		e.Str("name", "supervisor").Str("type", "supervisor")
		if h.version != "" {
			e.Str("version", h.version)
		}
	})
	x.renderPrefixes()
	return x
}

// rawObject renders a JSON object once, for RawJSON.
func rawObject(fill func(e *zerolog.Event)) []byte {
	var buf bytes.Buffer
	zl := zerolog.New(&buf)
	e := zl.Log()
	fill(e)
	e.Send()
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// begin starts a line: timestamp, ecs, host, service.
func (x *ecs) begin(c *capture, t time.Time) *zerolog.Event {
	zl := zerolog.New(c)
	e := zl.Log()
	var ts [40]byte
	return e.RawJSON("@timestamp", appendTime(ts[:0], t)).
		RawJSON("ecs", x.ecsJSON).
		RawJSON("host", x.hostJSON).
		RawJSON("service", x.svcJSON)
}

// eventObject adds the categorization fields.
func eventObject(e *zerolog.Event, action string, types []string, outcome, reason string) {
	d := e.CreateDict().Str("kind", "event")
	if types != nil {
		d.Strs("category", catProcess).Strs("type", types)
	}
	d.Str("action", action).Str("module", "supervisor")
	if outcome != "" {
		d.Str("outcome", outcome)
	}
	if reason != "" {
		d.Str("reason", reason)
	}
	e.Dict("event", d)
}

func commBytes(c *[16]byte) []byte {
	n := bytes.IndexByte(c[:], 0)
	if n < 0 {
		n = len(c)
	}
	return c[:n]
}

// signalName names a signal number without allocating.
func signalName(sig int) string {
	if n := unix.SignalName(syscall.Signal(sig)); n != "" {
		return n
	}
	return "SIG?"
}

func (x *ecs) event(c *capture, ev *events.Event) {
	w := &c.proc
	w.b, w.cut = w.b[:0], c.cut
	x.procEvent(w, c.action, ev)
	c.write(w.b) // jsonx escaped its line breaks already
}

// processRef adds process.pid and process.entity_id from a claim.
func processRef(e *zerolog.Event, pid int32, tok token.Token) {
	p := e.CreateDict().Int32("pid", pid)
	if !tok.IsZero() {
		p.Str("entity_id", tok.String())
	}
	e.Dict("process", p)
}

func (x *ecs) verdict(c *capture, v *verdict.Verdict) {
	e := x.begin(c, time.Now())
	eventObject(e, c.action, typeInfo, verdictOutcome(v.Result), v.Reason)
	processRef(e, v.Pid, v.Token)
	s := e.CreateDict().Str("verdict", v.Result.String()).Str("mechanism", v.Mechanism)
	if !v.Observed.IsZero() {
		s.Str("observed_entity_id", v.Observed.String())
	}
	claimRef(e, s, c.claim)
	e.Dict("supervisor", s)
	e.Msg(v.String())
}

func (x *ecs) signal(c *capture, sg *Signal) {
	e := x.begin(c, time.Now())
	outcome := outcomeSuccess
	if sg.Err != nil {
		outcome = outcomeFailure
	}
	eventObject(e, c.action, typeChange, outcome, "")
	processRef(e, sg.Pid, sg.Token)
	if sg.Err != nil {
		e.Dict("error", e.CreateDict().Str("message", sg.Err.Error()))
	}
	s := e.CreateDict().Str("signal", sg.Signal).Str("mechanism", sg.Mechanism)
	claimRef(e, s, c.claim)
	e.Dict("supervisor", s)
	e.Send()
}

// dropsDict is dropped_lines (the total) and dropped (by class).
func dropsDict(e *zerolog.Event, d Drops, top []uidDrops) *zerolog.Event {
	by := e.CreateDict().Uint64("process_events", d.ProcessEvents).Uint64("audit", d.Audit).Uint64("verdicts", d.Verdicts).
		Uint64("signals", d.Signals).Uint64("other", d.Other).Uint64("sink", d.Sink)
	if len(top) > 0 {
		// The uids that lost the most process events: who filled the
		// buffer (a uid the mechanism did not read is left out).
		arr := e.CreateArray()
		for _, u := range top {
			ud := e.CreateDict()
			if u.uid != noUID {
				ud.Str("uid", strconv.FormatUint(uint64(u.uid), 10))
			}
			arr.Dict(ud.Uint64("lines", u.lines))
		}
		by.Array("process_events_by_uid", arr)
	}
	return e.CreateDict().Uint64("dropped_lines", d.total()).Dict("dropped", by)
}

func members(e *zerolog.Event, ms []actions.Member) *zerolog.Array {
	arr := e.CreateArray()
	for _, m := range ms {
		d := e.CreateDict().Int32("pid", m.Pid).Str("entity_id", m.Token.String())
		if m.Reason != "" {
			d.Str("reason", m.Reason)
		}
		arr.Dict(d)
	}
	return arr
}

func (x *ecs) teardown(c *capture, o *actions.Outcome) {
	e := x.begin(c, time.Now())
	types := typeInfo
	if o.Acted {
		types = typeEnd
	}
	eventObject(e, c.action, types, teardownOutcome(o), o.Verdict.Reason)
	processRef(e, o.Verdict.Pid, o.Verdict.Token)
	if o.Error != "" {
		e.Dict("error", e.CreateDict().Str("message", o.Error))
	}
	s := e.CreateDict().
		Str("verdict", o.Verdict.Result.String()).
		Str("mechanism", o.Mechanism).
		Bool("acted", o.Acted).
		Bool("dead", o.Dead).
		Bool("escalated", o.Escalated).
		Array("targeted", members(e, o.Targeted)).
		Array("survivors", members(e, o.Survivors))
	if len(o.Unproven) > 0 {
		s.Array("unproven", members(e, o.Unproven))
	}
	if o.Incomplete != "" {
		s.Str("incomplete", o.Incomplete)
	}
	if len(o.Signals) > 0 {
		s.Dict("signals", signalCounts(e, o.Signals))
	}
	claimRef(e, s, c.claim)
	e.Dict("supervisor", s)
	e.Send()
}

func (x *ecs) reconcile(c *capture, r *Reconcile) {
	e := x.begin(c, time.Now())
	eventObject(e, c.action, typeInfo, reconcileOutcome(r), "")
	e.Dict("supervisor", e.CreateDict().Str("mechanism", r.Mechanism).Dict("reconcile", e.CreateDict().
		Int("seen", r.Seen).
		Int("readopted", r.Readopted).
		Int("torn_down", r.TornDown).
		Int("foreign", r.Foreign).
		Int("unverifiable", r.Unverifiable).
		Int("already_gone", r.AlreadyGone).
		Int("failed", r.Failed)))
	e.Send()
}

func (x *ecs) lost(c *capture, mech events.Mechanism, count uint64) {
	e := x.begin(c, time.Now())
	eventObject(e, c.action, typeInfo, outcomeFailure, "")
	s := e.CreateDict().Str("mechanism", string(mech))
	if count > 0 {
		s.Uint64("lost_events", count)
	}
	e.Dict("supervisor", s)
	e.Msg("process events lost; resyncing from the process table")
}

func (x *ecs) dropped(c *capture, d Drops, top []uidDrops) {
	e := x.begin(c, time.Now())
	// Not about a process: no event.category.
	eventObject(e, c.action, nil, outcomeFailure, "")
	e.Dict("supervisor", dropsDict(e, d, top))
	e.Msg("log lines dropped: the log sink was slow or failing")
}

func (x *ecs) service(c *capture, sv *Service) {
	e := x.begin(c, time.Now())
	eventObject(e, c.action, nil, "", sv.Reason)
	e.Dict("supervisor", e.CreateDict().Str("mechanism", string(sv.Mechanism)).Int("pid", x.h.pid))
	e.Send()
}

func (x *ecs) request(c *capture, r *Request) {
	e := x.begin(c, time.Now())
	outcome, reason := outcomeSuccess, ""
	if r.Err != nil {
		outcome, reason = outcomeFailure, r.Err.Error()
	}
	types := typeChange
	if r.Action == ActionLaunchRequested {
		types = typeStart
	}
	eventObject(e, c.action, types, outcome, reason)
	e.Dict("user", e.CreateDict().Str("id", strconv.FormatUint(uint64(r.UID), 10)).
		Dict("group", e.CreateDict().Str("id", strconv.FormatUint(uint64(r.GID), 10))))
	argv, cut := r.args()
	if len(r.Argv) > 0 || r.RunAs != nil || r.Target != 0 {
		p := e.CreateDict()
		if r.Target != 0 {
			p.Int32("pid", r.Target)
			if !r.TargetTok.IsZero() {
				p.Str("entity_id", r.TargetTok.String())
			}
		}
		if len(r.Argv) > 0 {
			p.Strs("args", argv).Int("args_count", len(r.Argv))
		}
		if r.RunAs != nil {
			p.Dict("user", e.CreateDict().Str("id", strconv.FormatUint(uint64(*r.RunAs), 10)))
		}
		e.Dict("process", p)
	}
	sv := e.CreateDict().Dict("requester", e.CreateDict().Int32("pid", r.Pid))
	if r.ArgsRedacted {
		sv.Bool("args_redacted", true)
	}
	if cut {
		sv.Bool("args_truncated", true)
	}
	if r.ClaimID != "" {
		sv.Dict("claim", e.CreateDict().Str("id", r.ClaimID).Str("owner", r.Owner).Str("kind", r.Kind))
	}
	e.Dict("supervisor", sv)
	e.Send()
}

func (x *ecs) internal(c *capture, msg string, stack []byte) {
	e := x.begin(c, time.Now())
	// Not about a process: no event.category.
	eventObject(e, c.action, nil, outcomeFailure, "")
	e.Dict("error", e.CreateDict().Str("message", msg).Bytes("stack_trace", stack))
	e.Msg("internal error")
}

// signalCounts is a teardown's signal counts as an object, keys sorted so
// that equal outcomes give equal lines.
func signalCounts(e *zerolog.Event, m map[string]int) *zerolog.Event {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	d := e.CreateDict()
	for _, n := range names {
		d.Int(n, m[n])
	}
	return d
}

// claimRef adds supervisor.claim.id when the line is for a claim.
func claimRef(e *zerolog.Event, s *zerolog.Event, claim string) {
	if claim != "" {
		s.Dict("claim", e.CreateDict().Str("id", claim))
	}
}

func (x *ecs) claim(c *capture, ev *ClaimEvent) {
	e := x.begin(c, time.Now())
	types := typeChange // a pruned claim too: ECS expects no deletion in the process category
	if ev.Action == ActionJobExited {
		types = typeEnd
	}
	eventObject(e, c.action, types, "", ev.Reason)
	if ev.Pid != 0 || ev.ExitCode != nil {
		p := e.CreateDict()
		if ev.Pid != 0 {
			p.Int32("pid", ev.Pid)
		}
		if !ev.Token.IsZero() {
			p.Str("entity_id", ev.Token.String())
		}
		if ev.ExitCode != nil {
			p.Int("exit_code", *ev.ExitCode)
		}
		e.Dict("process", p)
	}
	e.Dict("user", e.CreateDict().Str("id", strconv.FormatUint(uint64(ev.UID), 10)))
	cl := e.CreateDict().Str("id", ev.ClaimID).Str("owner", ev.Owner).Str("kind", ev.Kind)
	if ev.State != "" {
		cl.Str("state", ev.State)
	}
	if ev.From != "" {
		cl.Str("previous_state", ev.From)
	}
	s := e.CreateDict().Dict("claim", cl)
	if ev.Signal != 0 {
		s.Int("exit_signal", ev.Signal)
	}
	e.Dict("supervisor", s)
	e.Send()
}
