package logfeed

import (
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// OCSF Process Activity (class 1007, category 1 System Activity) activity
// ids used here.
const (
	ocsfClass     = 1007
	ocsfLaunch    = 1
	ocsfTerminate = 2
	ocsfOther     = 99
)

var ocsfTypeNames = map[int]string{
	ocsfLaunch:    "Process Activity: Launch",
	ocsfTerminate: "Process Activity: Terminate",
	ocsfOther:     "Process Activity: Other",
}

// ocsf encodes lines as OCSF Process Activity events. Fork and exec are
// Launch, exit is Terminate (reflexive: the actor is the process itself),
// a teardown and a terminating signal are Terminate with the supervisor as
// the actor, and everything else is Other with activity_name set to the
// action. Supervisor-specific data goes in "unmapped", as OCSF asks.
type ocsf struct {
	h          *host
	metaJSON   []byte
	deviceJSON []byte
	selfJSON   []byte // the supervisor as a process object
}

func newOCSF(h *host) *ocsf {
	x := &ocsf{h: h}
	x.metaJSON = rawObject(func(e *zerolog.Event) {
		p := e.CreateDict().Str("name", "supervisor").Str("vendor_name", "procsupervisor")
		if h.version != "" {
			p.Str("version", h.version)
		}
		e.Str("version", OCSFVersion).Dict("product", p).Str("log_name", "supervisor")
	})
	x.deviceJSON = rawObject(func(e *zerolog.Event) {
		if h.hostname != "" {
			e.Str("hostname", h.hostname)
		}
		e.Int("type_id", 0).Str("type", "Unknown")
	})
	x.selfJSON = rawObject(func(e *zerolog.Event) {
		e.Int("pid", h.pid).Str("name", "supervisor")
	})
	return x
}

func ocsfSeverity(s severity) (int, string) {
	switch s {
	case sevError:
		return 4, "High"
	case sevWarning:
		return 3, "Medium"
	case sevNotice:
		return 2, "Low"
	}
	return 1, "Informational"
}

func (x *ocsf) begin(c *capture, t time.Time, activity int, status string) *zerolog.Event {
	zl := zerolog.New(c)
	e := zl.Log()
	name := c.action
	switch activity {
	case ocsfLaunch:
		name = "Launch"
	case ocsfTerminate:
		name = "Terminate"
	}
	sevID, sev := ocsfSeverity(c.sev)
	e.Int64("time", t.UnixMilli()).
		Int("class_uid", ocsfClass).Str("class_name", "Process Activity").
		Int("category_uid", 1).Str("category_name", "System Activity").
		Int("activity_id", activity).Str("activity_name", name).
		Int("type_uid", ocsfClass*100+activity).Str("type_name", ocsfTypeNames[activity]).
		Int("severity_id", sevID).Str("severity", sev)
	switch status {
	case outcomeSuccess:
		e.Int("status_id", 1).Str("status", "Success")
	case outcomeFailure:
		e.Int("status_id", 2).Str("status", "Failure")
	case outcomeUnknown:
		e.Int("status_id", 0).Str("status", "Unknown")
	}
	return e.RawJSON("metadata", x.metaJSON).RawJSON("device", x.deviceJSON)
}

func (x *ocsf) actorSelf(e *zerolog.Event) {
	e.Dict("actor", e.CreateDict().RawJSON("process", x.selfJSON))
}

func (x *ocsf) selfProcess(e *zerolog.Event) {
	e.RawJSON("process", x.selfJSON)
}

func ref(e *zerolog.Event, pid int32, tok token.Token) *zerolog.Event {
	d := e.CreateDict().Int32("pid", pid)
	if !tok.IsZero() {
		d.Str("uid", tok.String())
	}
	return d
}

func (x *ocsf) event(c *capture, ev *events.Event) {
	activity := ocsfLaunch
	if ev.Kind == events.Exit {
		activity = ocsfTerminate
	}
	t := x.h.clock.At(ev.Time)
	now := t
	e := x.begin(c, t, activity, "")
	var tok [80]byte

	p := e.CreateDict().Int32("pid", ev.Pid)
	if !ev.Token.IsZero() {
		p.Bytes("uid", ev.Token.Append(tok[:0]))
		if st, ok := startTime(&x.h.clock, now, ev.Token); ok {
			p.Int64("created_time", st.UnixMilli())
		}
	}
	limit := x.h.argsMax
	if c.cut > 0 {
		limit = c.cut
	}
	c.ocsfImage(p, commBytes(&ev.Comm), ev.Exe, ev.Argv, limit)
	ocsfContext(p, &ev.Exec, &ev.Ctx, x.h.names)
	if ev.Kind == events.Exit {
		p.Int64("terminated_time", t.UnixMilli())
	}
	var parent *zerolog.Event
	if ev.PPid != 0 || !ev.ParentToken.IsZero() {
		parent = p.CreateDict().Int32("pid", ev.PPid)
		if !ev.ParentToken.IsZero() {
			parent.Bytes("uid", ev.ParentToken.Append(tok[:0]))
			if st, ok := startTime(&x.h.clock, now, ev.ParentToken); ok {
				parent.Int64("created_time", st.UnixMilli())
			}
		}
		if d := ev.Parent; d != nil {
			c.ocsfImage(parent, commBytes(&d.Comm), d.Exe, d.Argv, limit)
			ocsfContext(parent, &d.Exec, &d.Ctx, x.h.names)
		}
		p.Dict("parent_process", parent)
	}
	e.Dict("process", p)

	// The actor of a launch is the parent; an exit is reflexive.
	a := e.CreateDict()
	ap := a.CreateDict()
	if ev.Kind == events.Exit || (ev.PPid == 0 && ev.ParentToken.IsZero()) {
		ap.Int32("pid", ev.Pid)
		if !ev.Token.IsZero() {
			ap.Bytes("uid", ev.Token.Append(tok[:0]))
		}
	} else {
		ap.Int32("pid", ev.PPid)
		if !ev.ParentToken.IsZero() {
			ap.Bytes("uid", ev.ParentToken.Append(tok[:0]))
		}
	}
	e.Dict("actor", a.Dict("process", ap))

	if ev.Kind == events.Exit {
		if code, ok := ev.Exited(); ok {
			e.Int("exit_code", code)
		}
	}
	u := e.CreateDict().Str("action", c.action).Str("mechanism", string(ev.Mechanism))
	if ev.Inferred {
		u.Bool("inferred", true)
	}
	if sig, ok := ev.Signaled(); ok && ev.Kind == events.Exit {
		u.Str("exit_signal", signalName(sig))
	}
	ocsfUnmapped(u, ev, limit)
	e.Dict("unmapped", u)
	e.Send()
}

// ocsfImage adds the name, command line and executable file to the OCSF
// process object p.
func (c *capture) ocsfImage(p *zerolog.Event, name []byte, exe string, argv []string, limit int) {
	if len(name) > 0 {
		p.Bytes("name", name)
	}
	if len(argv) > 0 {
		c.scratch = commandLine(c.scratch[:0], argv, limit)
		p.Bytes("cmd_line", c.scratch)
	}
	if exe != "" {
		p.Dict("file", exeFile(p, exe))
	}
}

func (x *ocsf) verdict(c *capture, v *verdict.Verdict) {
	e := x.begin(c, time.Now(), ocsfOther, verdictOutcome(v.Result))
	if v.Reason != "" {
		e.Str("status_detail", v.Reason)
	}
	x.actorSelf(e)
	e.Dict("process", ref(e, v.Pid, v.Token))
	u := e.CreateDict().Str("action", c.action).Str("verdict", v.Result.String()).Str("mechanism", v.Mechanism)
	if !v.Observed.IsZero() {
		u.Str("observed_uid", v.Observed.String())
	}
	if c.claim != "" {
		u.Str("claim_id", c.claim)
	}
	e.Dict("unmapped", u)
	e.Msg(v.String())
}

func terminating(sig string) bool {
	switch sig {
	case "SIGTERM", "SIGKILL", "SIGINT", "SIGQUIT", "SIGHUP":
		return true
	}
	return false
}

func (x *ocsf) signal(c *capture, sg *Signal) {
	activity := ocsfOther
	if terminating(sg.Signal) {
		activity = ocsfTerminate
	}
	outcome := outcomeSuccess
	if sg.Err != nil {
		outcome = outcomeFailure
	}
	e := x.begin(c, time.Now(), activity, outcome)
	if sg.Err != nil {
		e.Str("status_detail", sg.Err.Error())
	}
	x.actorSelf(e)
	e.Dict("process", ref(e, sg.Pid, sg.Token))
	u := e.CreateDict().Str("action", c.action).Str("signal", sg.Signal).Str("mechanism", sg.Mechanism)
	if c.claim != "" {
		u.Str("claim_id", c.claim)
	}
	e.Dict("unmapped", u)
	e.Send()
}

func (x *ocsf) request(c *capture, r *Request) {
	activity, outcome := ocsfOther, outcomeSuccess
	if r.Action == ActionLaunchRequested {
		activity = ocsfLaunch
	}
	if r.Err != nil {
		outcome = outcomeFailure
	}
	e := x.begin(c, time.Now(), activity, outcome)
	if r.Err != nil {
		e.Str("status_detail", r.Err.Error())
	}
	e.Dict("actor", e.CreateDict().Dict("user", e.CreateDict().Str("uid", strconv.FormatUint(uint64(r.UID), 10))).
		Dict("process", e.CreateDict().Int32("pid", r.Pid)))
	p := e.CreateDict().Int32("pid", r.Target) // 0: no process (yet)
	if r.Target != 0 {
		if !r.TargetTok.IsZero() {
			p.Str("uid", r.TargetTok.String())
		}
	}
	argv, cut := r.args()
	if len(r.Argv) > 0 {
		p.Str("cmd_line", strings.Join(argv, " "))
	}
	if r.RunAs != nil {
		p.Dict("user", e.CreateDict().Str("uid", strconv.FormatUint(uint64(*r.RunAs), 10)))
	}
	e.Dict("process", p)
	u := e.CreateDict().Str("action", c.action)
	if r.ArgsRedacted {
		u.Bool("args_redacted", true)
	}
	if cut {
		u.Bool("args_truncated", true).Int("args_count", len(r.Argv))
	}
	if r.ClaimID != "" {
		u.Str("claim_id", r.ClaimID).Str("claim_owner", r.Owner).Str("claim_kind", r.Kind)
	}
	e.Dict("unmapped", u)
	e.Send()
}

func ocsfMembers(e *zerolog.Event, ms []actions.Member) *zerolog.Array {
	arr := e.CreateArray()
	for _, m := range ms {
		d := e.CreateDict().Int32("pid", m.Pid).Str("uid", m.Token.String())
		if m.Reason != "" {
			d.Str("reason", m.Reason)
		}
		arr.Dict(d)
	}
	return arr
}

func (x *ocsf) teardown(c *capture, o *actions.Outcome) {
	activity := ocsfOther
	if o.Acted {
		activity = ocsfTerminate
	}
	e := x.begin(c, time.Now(), activity, teardownOutcome(o))
	detail := o.Error
	if detail == "" {
		detail = o.Verdict.Reason
	}
	if detail != "" {
		e.Str("status_detail", detail)
	}
	x.actorSelf(e)
	e.Dict("process", ref(e, o.Verdict.Pid, o.Verdict.Token))
	u := e.CreateDict().Str("action", c.action).
		Str("verdict", o.Verdict.Result.String()).
		Str("mechanism", o.Mechanism).
		Bool("acted", o.Acted).Bool("dead", o.Dead).Bool("escalated", o.Escalated).
		Array("targeted", ocsfMembers(e, o.Targeted)).
		Array("survivors", ocsfMembers(e, o.Survivors))
	if len(o.Unproven) > 0 {
		u.Array("unproven", ocsfMembers(e, o.Unproven))
	}
	if o.Incomplete != "" {
		u.Str("incomplete", o.Incomplete)
	}
	if len(o.Signals) > 0 {
		u.Dict("signals", signalCounts(e, o.Signals))
	}
	if c.claim != "" {
		u.Str("claim_id", c.claim)
	}
	e.Dict("unmapped", u)
	e.Send()
}

func (x *ocsf) reconcile(c *capture, r *Reconcile) {
	e := x.begin(c, time.Now(), ocsfOther, reconcileOutcome(r))
	x.actorSelf(e)
	x.selfProcess(e)
	e.Dict("unmapped", e.CreateDict().Str("action", c.action).Str("mechanism", r.Mechanism).Dict("reconcile", e.CreateDict().
		Int("seen", r.Seen).
		Int("readopted", r.Readopted).
		Int("torn_down", r.TornDown).
		Int("foreign", r.Foreign).
		Int("unverifiable", r.Unverifiable).
		Int("already_gone", r.AlreadyGone).
		Int("failed", r.Failed)))
	e.Send()
}

func (x *ocsf) lost(c *capture, mech events.Mechanism, count uint64) {
	e := x.begin(c, time.Now(), ocsfOther, outcomeFailure)
	x.actorSelf(e)
	x.selfProcess(e)
	u := e.CreateDict().Str("action", c.action).Str("mechanism", string(mech))
	if count > 0 {
		u.Uint64("lost_events", count)
	}
	e.Dict("unmapped", u)
	e.Msg("process events lost; resyncing from the process table")
}

func (x *ocsf) dropped(c *capture, d Drops, top []uidDrops) {
	e := x.begin(c, time.Now(), ocsfOther, outcomeFailure)
	x.actorSelf(e)
	x.selfProcess(e)
	e.Dict("unmapped", dropsDict(e, d, top).Str("action", c.action))
	e.Msg("log lines dropped: the log sink was slow or failing")
}

func (x *ocsf) service(c *capture, sv *Service) {
	e := x.begin(c, time.Now(), ocsfOther, "")
	if sv.Reason != "" {
		e.Str("status_detail", sv.Reason)
	}
	x.actorSelf(e)
	x.selfProcess(e)
	e.Dict("unmapped", e.CreateDict().Str("action", c.action).Str("mechanism", string(sv.Mechanism)))
	e.Send()
}

func (x *ocsf) internal(c *capture, msg string, stack []byte) {
	e := x.begin(c, time.Now(), ocsfOther, outcomeFailure)
	e.Str("status_detail", msg)
	x.actorSelf(e)
	x.selfProcess(e)
	e.Dict("unmapped", e.CreateDict().Str("action", c.action).Bytes("stack_trace", stack))
	e.Msg("internal error")
}

func (x *ocsf) claim(c *capture, ev *ClaimEvent) {
	activity := ocsfOther
	if ev.Action == ActionJobExited {
		activity = ocsfTerminate
	}
	e := x.begin(c, time.Now(), activity, outcomeSuccess)
	if ev.Reason != "" {
		e.Str("status_detail", ev.Reason)
	}
	x.actorSelf(e)
	p := e.CreateDict().Int32("pid", ev.Pid)
	if !ev.Token.IsZero() {
		p.Str("uid", ev.Token.String())
	}
	e.Dict("process", p)
	if ev.ExitCode != nil {
		e.Int("exit_code", *ev.ExitCode)
	}
	u := e.CreateDict().Str("action", c.action).Str("claim_id", ev.ClaimID).Str("claim_owner", ev.Owner).
		Str("claim_kind", ev.Kind).Str("claim_uid", strconv.FormatUint(uint64(ev.UID), 10))
	if ev.State != "" {
		u.Str("state", ev.State)
	}
	if ev.From != "" {
		u.Str("previous_state", ev.From)
	}
	if ev.Signal != 0 {
		u.Int("exit_signal", ev.Signal)
	}
	e.Dict("unmapped", u)
	e.Send()
}
