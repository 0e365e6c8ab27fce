package metrics

import (
	"runtime"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Metric names, exported so that dashboards, alerts and tests share one
// spelling.
const (
	EventsTotal       = "supervisor_events_total"
	EventsLostTotal   = "supervisor_events_lost_total"
	VerdictsTotal     = "supervisor_verdicts_total"
	SignalsTotal      = "supervisor_signals_total"
	TeardownsTotal    = "supervisor_teardowns_total"
	GraphNodes        = "supervisor_graph_nodes"
	Claims            = "supervisor_claims"
	LogLinesTotal     = "supervisor_log_lines_total"
	LogDroppedTotal   = "supervisor_log_lines_dropped_total"
	BuildInfo         = "supervisor_build_info"
	ScrapeErrorsTotal = "supervisor_metrics_scrape_errors_total"
)

// Label values for kinds and mechanisms outside the known sets (a newer
// source, a zero value): counted, never dropped, never a new series per
// value.
const other = "other"

// kinds and mechs are the label values resolved in advance; the index of a
// value is what kindIndex and mechIndex return.
var (
	kinds = [...]events.Kind{events.Fork, events.Exec, events.Exit, events.Lost}
	mechs = [...]events.Mechanism{events.EBPF, events.Netlink, events.ProcPoll, events.PSPoll, events.SysctlPoll}
	// results is indexed by verdict.Result; index 0 is the invalid result.
	results = [...]verdict.Result{0, verdict.Owned, verdict.Foreign, verdict.Gone, verdict.Unverifiable}
	// signals are the names the daemon sends; others share the "other"
	// series so a caller cannot grow the label set.
	signals = [...]string{"SIGTERM", "SIGKILL", "SIGSTOP", "SIGCONT", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}
)

// Teardown outcomes, the values of the outcome label.
const (
	// OutcomeTerminated: every member was gone within the grace period.
	OutcomeTerminated = "terminated"
	// OutcomeKilled: SIGKILL was needed, and then every member was gone.
	OutcomeKilled = "killed"
	// OutcomeSurvivors: verified members were still alive after SIGKILL.
	OutcomeSurvivors = "survivors"
)

// Options are the callbacks read at scrape time. A nil callback leaves its
// metric out of the exposition. Callbacks run on the scraping goroutine,
// possibly concurrently with each other; they must be safe for concurrent
// use and should not block.
type Options struct {
	// Graph returns the lineage graph's node counts: live processes, and
	// exited nodes still retained (lineage.Graph.Stats Live and Exited).
	Graph func() (live, exited int)
	// Claims calls emit once per (kind, state) of the claim store with the
	// number of claims in it. Emit every state the daemon knows, zero
	// included, so a series does not vanish when its count drops to 0.
	// Any local user may scrape, as often as it likes: count from what
	// is held in memory, never by reading the store.
	Claims func(emit func(kind, state string, n int))
	// LogFeed returns the log feed's line counters (logfeed.Stats Written
	// and Dropped); they only ever grow.
	LogFeed func() (written, dropped uint64)
}

// Metrics owns a registry and the pre-resolved series the daemon updates.
// Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	events    [len(kinds) + 1][len(mechs) + 1]prometheus.Counter // [kind][mech], last index is other
	lost      [len(mechs) + 1]prometheus.Counter
	verdicts  [len(results)]prometheus.Counter // index 0 counts invalid results
	signals   [len(signals) + 1]prometheus.Counter
	teardowns [3]prometheus.Counter // terminated, killed, survivors

	scrapeErrs atomic.Uint64
}

// New returns Metrics with every series registered: the counters at zero,
// supervisor_build_info{version, goversion} at 1, and the gauges of opts.
func New(version string, opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}

	ev := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: EventsTotal,
		Help: "Process events read from the event source, by kind (fork, exec, exit, lost: loss reports) and mechanism.",
	}, []string{"kind", "mechanism"})
	for k := range m.events {
		for j := range m.events[k] {
			m.events[k][j] = ev.WithLabelValues(kindLabel(k), mechLabel(j))
		}
	}

	lost := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: EventsLostTotal,
		Help: "Process events the mechanism dropped (known or estimated), by mechanism. Each loss triggers a resync from /proc.",
	}, []string{"mechanism"})
	for j := range m.lost {
		m.lost[j] = lost.WithLabelValues(mechLabel(j))
	}

	ver := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: VerdictsTotal,
		Help: "Ownership verdicts given, by result (OWNED, FOREIGN, GONE, UNVERIFIABLE).",
	}, []string{"result"})
	for i := range m.verdicts {
		m.verdicts[i] = ver.WithLabelValues(resultLabel(i))
	}

	sig := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: SignalsTotal,
		Help: "Signals sent through pidfds bound to OWNED instances, by signal name.",
	}, []string{"signal"})
	for i := range m.signals {
		m.signals[i] = sig.WithLabelValues(signalLabel(i))
	}

	td := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: TeardownsTotal,
		Help: "Tree teardowns that acted, by outcome: terminated (gone within the grace period), killed (SIGKILL needed), survivors (members alive after SIGKILL).",
	}, []string{"outcome"})
	for i, o := range [...]string{OutcomeTerminated, OutcomeKilled, OutcomeSurvivors} {
		m.teardowns[i] = td.WithLabelValues(o)
	}

	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfo,
		Help:        "Build information of the running supervisor; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	build.Set(1)

	scrapeErrs := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: ScrapeErrorsTotal,
		Help: "Scrapes of the metrics endpoint that failed to gather or encode.",
	}, func() float64 { return float64(m.scrapeErrs.Load()) })

	m.reg.MustRegister(ev, lost, ver, sig, td, build, scrapeErrs,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{opts: opts},
	)
	return m
}

// Event counts one event read from a source. It does not allocate.
func (m *Metrics) Event(kind events.Kind, mech events.Mechanism) {
	m.events[kindIndex(kind)][mechIndex(mech)].Inc()
}

// Lost adds n events dropped by mech. A Lost event whose count is unknown
// should be counted as 1: a loss happened.
func (m *Metrics) Lost(mech events.Mechanism, n uint64) {
	m.lost[mechIndex(mech)].Add(float64(n))
}

// Verdict counts one verdict.
func (m *Metrics) Verdict(r verdict.Result) {
	if int(r) >= len(m.verdicts) {
		r = 0
	}
	m.verdicts[r].Inc()
}

// Signal counts one signal sent, by name ("SIGTERM"); names outside the
// signals the daemon sends count under "other".
func (m *Metrics) Signal(sig string) { m.Signals(sig, 1) }

// Signals adds n signals of one name, as actions.Outcome.Signals reports
// them.
func (m *Metrics) Signals(sig string, n int) {
	if n > 0 {
		m.signals[signalIndex(sig)].Add(float64(n))
	}
}

// Teardown counts one teardown that acted (actions.Outcome.Acted): dead
// says every targeted member is gone, escalated that SIGKILL was needed.
// A teardown the verdict forbade is counted by Verdict, not here.
func (m *Metrics) Teardown(dead, escalated bool) {
	switch {
	case !dead:
		m.teardowns[2].Inc()
	case escalated:
		m.teardowns[1].Inc()
	default:
		m.teardowns[0].Inc()
	}
}

func kindIndex(k events.Kind) int {
	if k >= events.Fork && k <= events.Lost {
		return int(k - events.Fork)
	}
	return len(kinds)
}

func kindLabel(i int) string {
	if i < len(kinds) {
		return kinds[i].String()
	}
	return other
}

func mechIndex(m events.Mechanism) int {
	switch m {
	case events.EBPF:
		return 0
	case events.Netlink:
		return 1
	case events.ProcPoll:
		return 2
	case events.PSPoll:
		return 3
	case events.SysctlPoll:
		return 4
	}
	return len(mechs)
}

func mechLabel(i int) string {
	if i < len(mechs) {
		return string(mechs[i])
	}
	return other
}

func resultLabel(i int) string {
	if i == 0 {
		return "INVALID"
	}
	return results[i].String()
}

func signalIndex(s string) int {
	for i, n := range signals {
		if n == s {
			return i
		}
	}
	return len(signals)
}

func signalLabel(i int) string {
	if i < len(signals) {
		return signals[i]
	}
	return other
}

// stateCollector reads the gauges of Options at scrape time.
type stateCollector struct{ opts Options }

var (
	graphDesc = prometheus.NewDesc(GraphNodes,
		"Nodes held by the lineage graph, by state: live processes, and exited nodes retained for lineage and pid-reissue proof.",
		[]string{"state"}, nil)
	claimsDesc = prometheus.NewDesc(Claims,
		"Claims in the store, by kind (grant, job) and state.",
		[]string{"kind", "state"}, nil)
	logLinesDesc = prometheus.NewDesc(LogLinesTotal,
		"Log feed lines the sink accepted.", nil, nil)
	logDroppedDesc = prometheus.NewDesc(LogDroppedTotal,
		"Log feed lines lost (buffer full, sink failure); the feed reports the count in its own lines too.", nil, nil)
)

// Describe implements prometheus.Collector. It sends only the descriptors
// whose callbacks are set, so the registry checks them at registration.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	if c.opts.Graph != nil {
		ch <- graphDesc
	}
	if c.opts.Claims != nil {
		ch <- claimsDesc
	}
	if c.opts.LogFeed != nil {
		ch <- logLinesDesc
		ch <- logDroppedDesc
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.opts.Graph != nil {
		live, exited := c.opts.Graph()
		ch <- prometheus.MustNewConstMetric(graphDesc, prometheus.GaugeValue, float64(live), "live")
		ch <- prometheus.MustNewConstMetric(graphDesc, prometheus.GaugeValue, float64(exited), "exited")
	}
	if c.opts.Claims != nil {
		c.opts.Claims(func(kind, state string, n int) {
			ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, float64(n), kind, state)
		})
	}
	if c.opts.LogFeed != nil {
		w, d := c.opts.LogFeed()
		ch <- prometheus.MustNewConstMetric(logLinesDesc, prometheus.CounterValue, float64(w))
		ch <- prometheus.MustNewConstMetric(logDroppedDesc, prometheus.CounterValue, float64(d))
	}
}

// handlerOpts are the promhttp options Handler uses.
func (m *Metrics) handlerOpts() promhttp.HandlerOpts {
	return promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            scrapeErrorLog{m},
		MaxRequestsInFlight: 4,
	}
}

// scrapeErrorLog counts the errors promhttp reports instead of printing
// them: the daemon's log feed is the only place it writes.
type scrapeErrorLog struct{ m *Metrics }

func (l scrapeErrorLog) Println(...any) { l.m.scrapeErrs.Add(1) }
