package logfeed

// class is the kind of a line, for the buffer's priority and the drop
// counts: when the buffer is full, a line of any other class takes the
// place of the newest process event in it; a process event is dropped.
type class uint8

const (
	classProcess class = iota // fork, exec, exit
	classAudit                // requests, and what happened to claims
	classVerdict              // verdicts
	classSignal               // signals and teardowns
	classOther                // reconcile, loss, service, internal errors
	classSink                 // lines a failing sink lost, whatever their class
	numClasses
)

// classOf returns the class of a line by its event.action.
func classOf(action string) class {
	switch action {
	case ActionProcessStarted, ActionProcessExec, ActionProcessEnded:
		return classProcess
	case ActionVerdict:
		return classVerdict
	case ActionSignalSent, ActionTeardown:
		return classSignal
	case ActionLaunchRequested, ActionAdmitRequested, ActionReleaseRequested, ActionKillRequested, ActionReapRequested,
		ActionClaimState, ActionWallClock, ActionHolderExited, ActionJobExited, ActionJobOutputBounded, ActionClaimPruned:
		return classAudit
	}
	return classOther
}

// Drops counts dropped lines by class. Only process events are dropped to
// make room in the buffer; a line of another class is dropped only when
// the buffer holds no process event to give way (or after Close).
type Drops struct {
	ProcessEvents uint64 `json:"process_events"` // fork, exec and exit lines
	Audit         uint64 `json:"audit"`          // request lines and claim changes
	Verdicts      uint64 `json:"verdicts"`
	Signals       uint64 `json:"signals"` // signal and teardown lines
	Other         uint64 `json:"other"`   // reconcile, loss, service, internal error
	// Sink counts lines a failing sink lost, whatever their class (a
	// stream sink loses what it had buffered with the line it writes).
	Sink uint64 `json:"sink"`
}

// uidDrops is how many process events of one uid were dropped (uid
// noUID: of processes whose ids the mechanism did not read).
type uidDrops struct {
	uid   uint32
	lines uint64
}

// maxDropUIDs is how many uids a log_lines_dropped line names: those
// that lost the most process events.
const maxDropUIDs = 4

// dropsOf reads per-class counters into a Drops.
func dropsOf(n *[numClasses]uint64) Drops {
	return Drops{n[classProcess], n[classAudit], n[classVerdict], n[classSignal], n[classOther], n[classSink]}
}

// total is the sum of every class.
func (d Drops) total() uint64 {
	return d.ProcessEvents + d.Audit + d.Verdicts + d.Signals + d.Other + d.Sink
}
