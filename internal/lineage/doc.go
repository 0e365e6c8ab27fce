// Package lineage keeps the live lineage graph: every process instance the
// supervisor knows, keyed by (pid, start token), with the parent that created
// it, the generations that held each pid, and how long the graph has watched
// each instance without a gap.
//
// The graph is fed by events.Event from any mechanism (eBPF, the netlink proc
// connector, or a poller whose events are Inferred) and seeded from a /proc
// scan taken after the source is attached (attach, Seed, drain). Apply is the
// hot path: it takes one write lock, allocates nothing once node slots are
// recycled, and costs O(1) amortised for in-order events. The newest
// generation at each pid is found through a pid-indexed table
// (internal/pidtab), not a hash map.
//
// What the graph keeps:
//
//   - Birth lineage. A node's parent is the creator named by its Fork event
//     (or the parent a scan saw, for a process whose fork the graph never
//     saw, which is flagged as not BornObserved). Reparenting to init or a
//     subreaper does not change it, so Descendants finds a double-forked
//     grandchild after the middle process exited.
//   - Generations. Exit then fork at the same pid is a new node; the old one
//     stays linked as the pid's previous generation for a while, so a verdict
//     can say "pid reissued: exit of 4242@<token> observed at <time>".
//     A fork whose token is newer than the pid's live node implies that node
//     exited (ExitImplied). Ordering uses start ticks, then the pidfs inode,
//     which the kernel never reuses within a boot and hands out in
//     increasing order.
//   - Partial tokens. An exit with a zero token (netlink, process already
//     reaped) is attributed by its CLOCK_BOOTTIME to the generation whose
//     lifetime contains it, never blindly to whoever holds the pid now; an
//     exit the graph cannot attribute is counted and breaks the continuity
//     of the pid's live node instead.
//   - Retention. Exited nodes stay while a live descendant needs them
//     (Pinned), so birth ancestry of a live process stays whole, then for a
//     bounded window (Config.MaxExited nodes, Config.MaxExitedAge). Pinned
//     nodes are capped too (Config.MaxPinned): past the cap the oldest is
//     dropped and its children are spliced onto its parent and flagged
//     AncestryElided, so Descendants of every older ancestor still finds
//     them. Node count stays below live + MaxExited + MaxPinned.
//   - Continuity. A Lost event or a Resync opens a gap: every node live
//     across it is watched only since the gap (Watch.Since), and is no
//     longer Continuous. Seed marks the start of watching, not a gap.
//   - Ownership. Admit names a root; nodes born from it (observed forks)
//     inherit it, as do children born later. A pid reissued after the root's
//     generation exited does not inherit anything from the old generation.
//
// Limits: the graph trusts the tokens its source computes. Ticks-only tokens
// cannot tell apart two instances born in the same clock tick at one pid; a
// claim that matches a node only that far is reported as token.Unproven,
// never as Same. events.Proc carries no process state, so a zombie in the
// seed looks live until its reaping is seen by a later Resync. Queries copy
// nodes out under a read lock; a Node is a snapshot, stale as soon as it is
// returned.
package lineage
