// Package actions signals processes, and only through handles bound to
// instances whose verdict is OWNED (internal/pidfd). Its tree teardown stops
// the tree from growing, sends SIGTERM and SIGCONT so that a stopped process
// handles the TERM, waits out a grace period, sends SIGKILL to what is left,
// and looks again for children born during the teardown. Survivors are
// reported by (pid, token). A process group is signalled with killpg only
// while its leader is alive and OWNED; a live group under a gone leader is
// reported, never signalled.
package actions
