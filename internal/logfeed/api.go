package logfeed

import (
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Actions: the values of event.action (ECS) and activity_name (OCSF).
const (
	ActionProcessStarted    = "process_started" // fork
	ActionProcessExec       = "process_exec"    // exec
	ActionProcessEnded      = "process_ended"   // exit
	ActionVerdict           = "verdict"
	ActionSignalSent        = "signal_sent"
	ActionTeardown          = "teardown"
	ActionReconcile         = "reconcile"
	ActionEventsLost        = "events_lost"
	ActionLogLinesDropped   = "log_lines_dropped"
	ActionSupervisorStarted = "supervisor_started"
	ActionSupervisorStopped = "supervisor_stopped"
	ActionInternalError     = "internal_error"

	// Requests to the daemon that change something (Logger.Request).
	ActionLaunchRequested  = "launch_requested"
	ActionAdmitRequested   = "admit_requested"
	ActionReleaseRequested = "release_requested"
	ActionKillRequested    = "kill_requested"
	ActionReapRequested    = "reap_requested"

	// What happens to a claim (Logger.Claim).
	ActionClaimState   = "claim_state_changed"
	ActionWallClock    = "wall_clock_expired"
	ActionHolderExited = "holder_exited"
	// ActionJobOutputBounded: a job's output file went past its bound on
	// disk and its oldest bytes are being dropped (said once a job).
	ActionJobOutputBounded = "job_output_bounded"
	ActionJobExited        = "job_exited"
	// ActionClaimPruned: a finished claim deleted before its retention
	// ran out, to make room in a store users had filled.
	ActionClaimPruned = "claim_pruned"
)

// ClaimEvent is something that happened to a claim: a state change, its
// wall clock running out, its holder exiting, its job exiting.
type ClaimEvent struct {
	Action  string // one of ActionClaimState ... ActionClaimPruned
	ClaimID string
	Owner   string
	Kind    string
	UID     uint32 // the claim's owner uid
	// From and State are the states before and after (a state change).
	From, State string
	Reason      string
	// Pid and Token name the process concerned (the root, or the holder).
	Pid   int32
	Token token.Token
	// ExitCode or Signal, for a job's exit, when known.
	ExitCode *int
	Signal   int
}

// Request is one API request that changes something, for the audit trail:
// who asked (from SO_PEERCRED), for which claim, to run what as whom, and
// what came of it.
type Request struct {
	Action   string // one of the Action*Requested
	UID, GID uint32 // the requester's
	Pid      int32  // the requester's
	ClaimID  string
	Owner    string
	Kind     string
	Argv     []string
	// ArgsRedacted marks an Argv a redaction pattern rewrote.
	ArgsRedacted bool
	// RunAs is the uid the workload runs as (launch), when known.
	RunAs *uint32
	// Target is the instance a kill names.
	Target    int32
	TargetTok token.Token
	// Err is the refusal or failure; nil when the request was carried out.
	Err error
}

// RefusedArgsBytes bounds the argument bytes of a refused request's line
// (a launch the daemon did not carry out): the caller chose them and the
// refusal cost it nothing, so each of its lines must be small. The line
// gives the whole count (process.args_count) and marks the cut
// (supervisor.args_truncated). A request carried out logs its arguments
// whole: they are the claim's, within its quotas.
const RefusedArgsBytes = 512

// args returns the arguments r's line carries, and whether they were cut.
func (r *Request) args() ([]string, bool) {
	if r.Err == nil {
		return r.Argv, false
	}
	return cutArgs(r.Argv, RefusedArgsBytes)
}

// cutArgs returns argv cut to max bytes in all (at a character boundary)
// and whether anything was cut; argv itself is not changed.
func cutArgs(argv []string, max int) ([]string, bool) {
	n := 0
	for i, a := range argv {
		if n+len(a) <= max {
			n += len(a)
			continue
		}
		out := make([]string, i+1)
		copy(out, argv[:i])
		end := redact.Cut(a, max-n)
		for end > 0 && !utf8.RuneStart(a[end]) {
			end--
		}
		out[i] = a[:end]
		return out, true
	}
	return argv, false
}

// MaxStackBytes bounds the stack trace of an internal error line.
const MaxStackBytes = 16 << 10

// Signal is one signal the supervisor sent (or tried to send).
type Signal struct {
	Pid   int32
	Token token.Token // the target's token
	// Signal is the signal's name, such as "SIGTERM".
	Signal string
	// Mechanism says how it was sent: "pidfd", "killpg", "cgroup.kill".
	Mechanism string
	// Err is nil when the kernel accepted the signal.
	Err error
	// ClaimID is the claim the signal was sent for, if any.
	ClaimID string
}

// Reconcile counts what a reconcile of the stored claims found and did.
type Reconcile struct {
	Seen         int // claims judged
	Readopted    int // OWNED claims kept
	TornDown     int // OWNED orphans torn down
	Foreign      int // FOREIGN claims dropped, unsignalled
	Unverifiable int // UNVERIFIABLE claims kept and reported
	AlreadyGone  int // GONE claims released
	Failed       int // claims whose handling failed
	Mechanism    string
}

// Service describes the supervisor starting or stopping.
type Service struct {
	Stopping bool
	// Mechanism is the event source chosen.
	Mechanism events.Mechanism
	// Reason says why (why this mechanism, why stopping).
	Reason string
}

// Event logs a process event: a line for a fork, exec or exit whose kind
// is in Config.ProcessEvents, and a loss line for Lost whatever the
// setting. An event of a kind not chosen costs a mask test and nothing
// else: no encoding, no buffer. It does not allocate in the steady state
// and never blocks.
func (l *Logger) Event(ev *events.Event) {
	if ev.Kind == events.Lost {
		l.Lost(ev.Mechanism, ev.Count)
		return
	}
	if !l.kinds.Has(ev.Kind) {
		return
	}
	var action string
	switch ev.Kind {
	case events.Fork:
		action = ActionProcessStarted
	case events.Exec:
		action = ActionProcessExec
	case events.Exit:
		action = ActionProcessEnded
	default:
		return
	}
	c := l.get(action, sevInfo)
	if ev.Ctx.Has(events.CtxIDs) {
		c.uid = ev.Ctx.UID
	} else if ev.KnownUIDOK {
		c.uid = ev.KnownUID
	}
	if l.shares == nil || c.uid == 0 {
		l.enc.event(c, ev)
		l.put(c)
		return
	}
	src := ev
	sh, over := l.shares.over(c.uid, int64(ev.Time))
	if over && heavy(ev) {
		src = c.trim(ev)
	}
	c.n = 0
	l.enc.event(c, src)
	l.shares.charge(sh, c.n, src != ev)
	if src != ev {
		// The pooled capture keeps no pointer into the source's or the
		// cache's memory.
		c.held, c.heldParent, c.cut = events.Event{}, events.Desc{}, 0
	}
	l.put(c)
}

// Verdict logs a verdict.
func (l *Logger) Verdict(v verdict.Verdict) { l.VerdictFor("", v) }

// VerdictFor logs a verdict on a claim's root (supervisor.claim.id).
func (l *Logger) VerdictFor(claimID string, v verdict.Verdict) {
	sev := sevInfo
	if v.Result == verdict.Foreign || v.Result == verdict.Unverifiable {
		sev = sevNotice
	}
	c := l.get(ActionVerdict, sev)
	c.claim = claimID
	l.enc.verdict(c, &v)
	l.put(c)
}

// Signal logs a signal sent.
func (l *Logger) Signal(s Signal) {
	sev := sevInfo
	if s.Err != nil {
		sev = sevWarning
	}
	c := l.get(ActionSignalSent, sev)
	c.claim = s.ClaimID
	l.enc.signal(c, &s)
	l.put(c)
}

// Teardown logs the outcome of a tree teardown.
func (l *Logger) Teardown(o actions.Outcome) { l.TeardownFor("", o) }

// TeardownFor logs the outcome of a claim's teardown (supervisor.claim.id).
func (l *Logger) TeardownFor(claimID string, o actions.Outcome) {
	sev := sevInfo
	if teardownOutcome(&o) == outcomeFailure {
		sev = sevWarning
	}
	c := l.get(ActionTeardown, sev)
	c.claim = claimID
	l.enc.teardown(c, &o)
	l.put(c)
}

// Reconcile logs the summary of a reconcile.
func (l *Logger) Reconcile(r Reconcile) {
	sev := sevInfo
	if r.Failed > 0 {
		sev = sevWarning
	}
	c := l.get(ActionReconcile, sev)
	l.enc.reconcile(c, &r)
	l.put(c)
}

// Lost logs that a mechanism dropped process events (count 0: unknown).
func (l *Logger) Lost(mech events.Mechanism, count uint64) {
	c := l.get(ActionEventsLost, sevWarning)
	l.enc.lost(c, mech, count)
	l.put(c)
}

// Service logs the supervisor starting or stopping.
func (l *Logger) Service(s Service) {
	action := ActionSupervisorStarted
	if s.Stopping {
		action = ActionSupervisorStopped
	}
	c := l.get(action, sevNotice)
	l.enc.service(c, &s)
	l.put(c)
}

// Request logs one API request that changes something, carried out or
// refused: the audit trail of who asked root to do what.
func (l *Logger) Request(r Request) {
	sev := sevNotice
	if r.Err != nil {
		sev = sevWarning
	}
	c := l.get(r.Action, sev)
	l.enc.request(c, &r)
	l.put(c)
}

// Claim logs something that happened to a claim.
func (l *Logger) Claim(ev ClaimEvent) {
	c := l.get(ev.Action, sevNotice)
	c.claim = ev.ClaimID
	l.enc.claim(c, &ev)
	l.put(c)
}

// Internal logs an error inside the supervisor that it survived, such as a
// panic in an API handler: msg says what failed (error.message in ECS,
// status_detail in OCSF) and stack is the goroutine's stack
// (error.stack_trace; unmapped.stack_trace in OCSF), cut to MaxStackBytes.
func (l *Logger) Internal(msg string, stack []byte) {
	if len(stack) > MaxStackBytes {
		stack = stack[:MaxStackBytes]
	}
	c := l.get(ActionInternalError, sevError)
	l.enc.internal(c, msg, stack)
	l.put(c)
}

// encodeDropped renders the log_lines_dropped line into dst; the drain
// goroutine writes it straight to the sink.
func (l *Logger) encodeDropped(dst []byte, d Drops, top []uidDrops) []byte {
	c := &capture{l: l, action: ActionLogLinesDropped, sev: sevWarning, direct: true, dst: dst}
	l.enc.dropped(c, d, top)
	return c.dst
}

// Outcomes (event.outcome).
const (
	outcomeSuccess = "success"
	outcomeFailure = "failure"
	outcomeUnknown = "unknown"
)

func verdictOutcome(r verdict.Result) string {
	switch r {
	case verdict.Owned, verdict.Foreign, verdict.Gone:
		return outcomeSuccess
	}
	return outcomeUnknown
}

// teardownOutcome: failure when a fault stopped it or verified members
// survived; success when everything targeted is dead, or when there was
// nothing of ours to act on (GONE, FOREIGN); unknown when the verdict
// could not prove anything (UNVERIFIABLE).
func teardownOutcome(o *actions.Outcome) string {
	switch {
	case o.Error != "" || len(o.Survivors) > 0 || (o.Acted && !o.Dead):
		return outcomeFailure
	case o.Acted && o.Dead:
		return outcomeSuccess
	case o.Verdict.Result == verdict.Gone || o.Verdict.Result == verdict.Foreign:
		return outcomeSuccess
	}
	return outcomeUnknown
}

func reconcileOutcome(r *Reconcile) string {
	if r.Failed > 0 {
		return outcomeFailure
	}
	return outcomeSuccess
}
