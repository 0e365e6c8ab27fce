// Package metrics exposes the daemon's counters and gauges in the Prometheus
// text format, on an optional listen address (TCP host:port or unix:PATH).
// It is off unless the daemon is given an address.
//
// Counters are pushed by the daemon through typed methods (Event, Lost,
// Verdict, Signal, Teardown) whose label children are resolved when New
// runs, so the event path pays one atomic add and never allocates. Gauges
// that describe state held elsewhere (the lineage graph, the claim store,
// the log feed) are read through callbacks in Options when a scrape
// arrives, so this package imports no daemon code and the numbers are never
// stale copies.
//
// Every metric of the supervisor is prefixed supervisor_; counters end in
// _total. The Go runtime (go_*) and process (process_*) collectors are
// registered too, on the Metrics' own registry, never the global one.
//
// Limits: the endpoint has no authentication. Bind it to loopback or a unix
// socket whose directory only the scraper can reach; the counts reveal how
// busy the host is, nothing about individual processes (no pid, token or
// command line is ever a label).
package metrics
