// Package metrics exposes the daemon's counters and gauges in the Prometheus
// text format, on an optional listen address (TCP host:port or unix:PATH).
// It is off unless the daemon is given an address.
//
// Counters are pushed by the daemon through typed methods (Event, Lost,
// Verdict, Signal, Teardown) whose label children are resolved when New
// runs, so the event path pays one atomic add and never allocates. Gauges
// that describe state held elsewhere (the lineage graph, the claims,
// the log feed) are read through callbacks in Options when a scrape
// arrives, so this package imports no daemon code and the numbers are never
// stale copies.
//
// Every metric of the supervisor is prefixed supervisor_; counters end in
// _total. The Go runtime (go_*) and process (process_*) collectors are
// registered too, on the Metrics' own registry, never the global one.
//
// Limits: the endpoint has no authentication. A TCP address, even on
// loopback, is open to every local user (":port" to the network), and
// what it serves is host-wide: supervisor_claims counts every user's
// claims by kind and state, where status tells a user who is not root
// only its own. On a host shared by several users prefer unix:PATH: the
// socket is made mode 0666 whatever the daemon's umask (SocketMode), so
// who may scrape is decided by its directory alone (its owner, group and
// mode; the daemon refuses a directory another user could write to). The
// counts reveal how busy the host is, nothing about individual processes
// (no pid, token, user or command line is ever a label).
//
// A well-formed address that cannot be bound (a port another user
// listens on first) does not stop the daemon: ListenRetry tries it again
// in the background.
package metrics
