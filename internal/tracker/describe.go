package tracker

import (
	"github.com/procsupervisor/supervisor/internal/events"
)

// describe gives ev what the consumers of OnEvent see beyond the
// mechanism's record: its arguments redacted (Options.Redact), an exec's
// or the poller's inferred fork's that /proc filled, so that neither
// OnEvent nor the exec cache ever holds what the patterns hide; the parent's description from the exec cache (Options.Execs), or,
// when the cache did not see the parent's exec, only the comm the graph
// knows of that exact instance. The cache forgets an exited process at
// once when the graph holds no child of it.
func (t *Tracker) describe(ev *events.Event) {
	if len(ev.Argv) > 0 {
		// A vector cut at the capture's bound may end in the start of a
		// secret a pattern hides whole: ArgvCut hides that start too.
		redact := t.opts.Redact.Argv
		if ev.Exec.ArgsTruncated {
			redact = t.opts.Redact.ArgvCut
		}
		if argv, ok := redact(ev.Argv); ok {
			ev.Argv, ev.Exec.ArgsRedacted = argv, true
		}
	}
	ev.Parent = nil
	if t.opts.Execs == nil {
		return
	}
	t.opts.Execs.Observe(ev)
	if ev.Kind == events.Exit && !ev.Inferred && t.graph.Childless(ev.Pid, ev.Token) {
		// Nothing will ask for this instance as a parent: its
		// description need not wait for eviction.
		t.opts.Execs.Forget(ev.Pid, ev.Token)
	}
	if ev.Parent != nil || ev.Kind == events.Lost || ev.ParentToken.IsZero() {
		return
	}
	comm, ok := t.graph.Comm(ev.PPid, ev.ParentToken)
	if !ok || comm == ([16]byte{}) {
		return
	}
	// Only the name is ever set in t.named, and no consumer writes
	// through ev.Parent (it points into the exec cache as well): setting
	// the name alone spares clearing the 408-byte Desc at every event.
	t.named.Comm = comm
	ev.Parent = &t.named
}
