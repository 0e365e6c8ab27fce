// Package actions signals processes, and only through handles bound to
// instances whose verdict is OWNED (internal/pidfd). Its tree teardown stops
// the tree from growing, sends SIGTERM and SIGCONT so that a stopped process
// handles the TERM, waits out a grace period, sends SIGKILL to what is left,
// and looks again for children born during the teardown. Survivors are
// reported by (pid, token). Every signal goes through the pidfd of one
// proven member, never to a pid or a process group: a live group under a
// gone leader is reported, never signalled. A member whose uids change
// during the teardown so that the principal may no longer signal it is
// reported, not signalled again; when that member is the root asked for,
// it stays a target and, alive at the end, a survivor.
package actions
