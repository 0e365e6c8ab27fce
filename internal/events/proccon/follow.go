package proccon

// Follow is what the messages queued after an event tell of what its
// process did since: each is a reason why /proc, read after the event, no
// longer shows what the event's process was at the event.
type Follow uint8

const (
	// FollowExec: it exec'd again; /proc shows a later program.
	FollowExec Follow = 1 << iota
	// FollowIDs: a thread of it changed its user or group ids (setuid,
	// setgid and their kin: the kernel reports a change of the real,
	// effective, saved or file-system id).
	FollowIDs
	// FollowSession: it started a session (setsid, which also makes it a
	// group leader and drops its terminal).
	FollowSession
	// FollowComm: its name changed (prctl PR_SET_NAME, or a write to
	// /proc/PID/comm): the comm /proc shows is not the program's.
	FollowComm
	// FollowExit: a thread of it exited (the last one's exit ends it; the
	// kernel sends it before the pid can be reissued).
	FollowExit
	// FollowUnknown: the look-ahead could not see every message queued
	// (more than it holds were waiting, or some were lost): any of the
	// above may have happened unseen.
	FollowUnknown
)
