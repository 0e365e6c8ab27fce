package daemon

import (
	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/metrics"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// feed is where the daemon reports what it sees and does: every line goes
// to the log feed, and what is counted goes to the metrics too (when they
// are on). One call per fact keeps the two from disagreeing.
type feed struct {
	*logfeed.Logger
	m   *metrics.Metrics // nil when metrics are off
	hub hub              // the API's event streams (stream_linux.go)
}

// Event logs a process event (when process events are logged) and counts
// it; a Lost event counts the events lost.
func (f *feed) Event(ev *events.Event) {
	f.Logger.Event(ev)
	if f.m == nil {
		return
	}
	if ev.Kind == events.Lost {
		f.m.Lost(ev.Mechanism, max(ev.Count, 1))
		return
	}
	f.m.Event(ev.Kind, ev.Mechanism)
}

// Verdict logs and counts a verdict.
func (f *feed) Verdict(v verdict.Verdict) { f.VerdictFor("", v) }

// VerdictFor logs and counts a verdict on a claim's root.
func (f *feed) VerdictFor(claimID string, v verdict.Verdict) {
	f.Logger.VerdictFor(claimID, v)
	if f.m != nil {
		f.m.Verdict(v.Result)
	}
}

// Signal logs a signal sent (or refused) and counts those delivered.
func (f *feed) Signal(s logfeed.Signal) {
	f.Logger.Signal(s)
	if f.m != nil && s.Err == nil {
		f.m.Signal(s.Signal)
	}
}

// Teardown logs a teardown and, when it acted, counts its outcome.
func (f *feed) Teardown(o actions.Outcome) { f.TeardownFor("", o) }

// TeardownFor logs a claim's teardown and, when it acted, counts it.
func (f *feed) TeardownFor(claimID string, o actions.Outcome) {
	f.Logger.TeardownFor(claimID, o)
	if f.m != nil && o.Acted {
		f.m.Teardown(o.Dead, o.Escalated)
	}
}

// Error logs a fault the daemon survived (a store write that failed).
func (f *feed) Error(what string, err error) {
	f.Logger.Internal(what+": "+err.Error(), nil)
}

// wantsExecContext reports whether log feed lines of kinds k show the
// exec context that netlink and polling read from /proc and eBPF's exec
// program captures (tracker Options.ExecContext): exec lines, and fork
// lines, since a poller's inferred fork carries the context of the process
// as first seen. An exit-only feed needs none; its exit lines then
// describe a parent by the name and ids the graph and the kernel give,
// without its executable, arguments and directory, whatever the
// mechanism.
func wantsExecContext(k logfeed.Kinds) bool { return k&(logfeed.Forks|logfeed.Execs) != 0 }
