// Package daemon is the supervisor daemon: it holds the lineage graph
// (internal/tracker), a store of claims (internal/store: grants, contained
// process trees, and jobs, detached processes), and serves the local API
// (internal/api) on a Unix socket.
//
// Lifecycle (Run): lock and open the store (a corrupt store is an error, the
// daemon refuses to start), make or check the socket's directory (refused
// when another user owns it or may write to it: ErrUnsafeSocketDir), become
// a child subreaper, start the tracker, reconcile every stored claim against
// the verdict table before serving, then serve until the context ends. Shutdown leaves every process running and
// every claim recorded: a restart orphans nothing.
//
// Launch starts a process in its own process group and, where cgroup v2 is
// writable, its own cgroup (CLONE_INTO_CGROUP); the root's token is read from
// the spawn's pidfd before the daemon may reap it, so it names exactly the
// process started. A grant may be bound to a holder process; the holder's exit
// event from the tracker makes the grant an orphan, torn down if still OWNED.
// Members of a grant are recorded in the store as the tracker sees them born
// (fork events whose birth lineage leads to an admitted root), through a
// bounded queue to one writer goroutine, so bbolt never blocks the event path.
// A restarted daemon finds members again through the grant's cgroup, or
// through the recorded members, each bound and verified by its token.
//
// Children the daemon reaps (it is their parent or their subreaper) give jobs
// their exit codes; jobs that are no longer its children (after a restart) get
// theirs from exit events.
//
// Limits: a member born and reparented to init while the daemon was down
// was never recorded and, without a cgroup, cannot be proven a member: it is
// left alone. Member records are best effort: when the queue is full, a
// claim has too many members, its user's quota is spent or the store
// cannot write them, records are dropped and counted (status
// members_dropped; a store that cannot write is a store error too). With the ps fallback mechanism, the daemon's reaper may
// reap a ps child before its poller does (the poll then fails, loudly).
package daemon
