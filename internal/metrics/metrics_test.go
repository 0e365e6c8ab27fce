package metrics

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// scrape fetches h like a Prometheus server would and returns the body.
func scrape(t *testing.T, h http.Handler) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", Path, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", Path, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q, want text/plain", Path, ct)
	}
	return rec.Body.Bytes()
}

func parse(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return mfs
}

// value returns the sample of family name whose labels are exactly labels
// ("k=v,k=v" sorted by key, "" for none).
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name, labels string) (float64, bool) {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, lp.GetName()+"="+lp.GetValue())
		}
		sort.Strings(ls)
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		}
		t.Fatalf("%s: unexpected type %v", name, mf.GetType())
	}
	return 0, false
}

func testOptions() Options {
	return Options{
		Graph: func() (int, int) { return 1200, 4096 },
		Claims: func(emit func(kind, state string, n int)) {
			emit("grant", "running", 3)
			emit("grant", "released", 0)
			emit("job", "exited", 2)
		},
		LogFeed: func() (uint64, uint64) { return 9000, 7 },
	}
}

func TestExposition(t *testing.T) {
	m := New("v1.2.3-test", testOptions())
	for range 3 {
		m.Event(events.Fork, events.EBPF)
	}
	m.Event(events.Exit, events.Netlink)
	m.Event(events.Lost, events.Netlink)
	m.Lost(events.Netlink, 40)
	m.Verdict(verdict.Owned)
	m.Verdict(verdict.Owned)
	m.Verdict(verdict.Unverifiable)
	m.Signal("SIGTERM")
	m.Signals("SIGKILL", 2)
	m.Teardown(true, false)
	m.Teardown(true, true)
	m.Teardown(false, true)
	m.Teardown(false, true)

	mfs := parse(t, scrape(t, m.Handler()))

	types := []struct {
		name string
		typ  dto.MetricType
	}{
		{EventsTotal, dto.MetricType_COUNTER},
		{EventsLostTotal, dto.MetricType_COUNTER},
		{VerdictsTotal, dto.MetricType_COUNTER},
		{SignalsTotal, dto.MetricType_COUNTER},
		{TeardownsTotal, dto.MetricType_COUNTER},
		{GraphNodes, dto.MetricType_GAUGE},
		{Claims, dto.MetricType_GAUGE},
		{LogLinesTotal, dto.MetricType_COUNTER},
		{LogDroppedTotal, dto.MetricType_COUNTER},
		{BuildInfo, dto.MetricType_GAUGE},
		{ScrapeErrorsTotal, dto.MetricType_COUNTER},
		{"go_goroutines", dto.MetricType_GAUGE},
		{"process_resident_memory_bytes", dto.MetricType_GAUGE},
	}
	for _, tt := range types {
		mf := mfs[tt.name]
		if mf == nil {
			if strings.HasPrefix(tt.name, "process_") && runtime.GOOS != "linux" {
				continue
			}
			t.Errorf("family %s missing from the exposition", tt.name)
			continue
		}
		if got := mf.GetType(); got != tt.typ {
			t.Errorf("family %s type = %v, want %v", tt.name, got, tt.typ)
		}
		if mf.GetHelp() == "" {
			t.Errorf("family %s has no help text", tt.name)
		}
	}

	samples := []struct {
		name, labels string
		want         float64
	}{
		{EventsTotal, "kind=fork,mechanism=ebpf", 3},
		{EventsTotal, "kind=exit,mechanism=netlink", 1},
		{EventsTotal, "kind=lost,mechanism=netlink", 1},
		{EventsTotal, "kind=exec,mechanism=proc", 0}, // pre-resolved: present at 0
		{EventsLostTotal, "mechanism=netlink", 40},
		{EventsLostTotal, "mechanism=ebpf", 0},
		{VerdictsTotal, "result=OWNED", 2},
		{VerdictsTotal, "result=UNVERIFIABLE", 1},
		{VerdictsTotal, "result=FOREIGN", 0},
		{SignalsTotal, "signal=SIGTERM", 1},
		{SignalsTotal, "signal=SIGKILL", 2},
		{TeardownsTotal, "outcome=" + OutcomeTerminated, 1},
		{TeardownsTotal, "outcome=" + OutcomeKilled, 1},
		{TeardownsTotal, "outcome=" + OutcomeSurvivors, 2},
		{GraphNodes, "state=live", 1200},
		{GraphNodes, "state=exited", 4096},
		{Claims, "kind=grant,state=running", 3},
		{Claims, "kind=grant,state=released", 0},
		{Claims, "kind=job,state=exited", 2},
		{LogLinesTotal, "", 9000},
		{LogDroppedTotal, "", 7},
		{BuildInfo, "goversion=" + runtime.Version() + ",version=v1.2.3-test", 1},
		{ScrapeErrorsTotal, "", 0},
	}
	for _, tt := range samples {
		got, ok := value(t, mfs, tt.name, tt.labels)
		if !ok {
			t.Errorf("%s{%s} missing", tt.name, tt.labels)
			continue
		}
		if got != tt.want {
			t.Errorf("%s{%s} = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}

// TestNaming checks the exposition against Prometheus conventions: promlint
// (help text, _total on counters, base units, no reserved suffixes), the
// supervisor_ prefix on every metric of ours, and no label that could carry
// an unbounded value (pid, token, command line).
func TestNaming(t *testing.T) {
	m := New("dev", testOptions())
	body := scrape(t, m.Handler())

	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	bounded := map[string]bool{
		"kind": true, "mechanism": true, "result": true, "signal": true,
		"outcome": true, "state": true, "version": true, "goversion": true,
	}
	mfs := parse(t, body)
	ours := 0
	for name, mf := range mfs {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		ours++
		if !strings.HasPrefix(name, "supervisor_") {
			t.Errorf("metric %s: want the supervisor_ prefix", name)
		}
		if isCounter := mf.GetType() == dto.MetricType_COUNTER; isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("metric %s (%v): _total is for counters and counters only", name, mf.GetType())
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if !bounded[lp.GetName()] {
					t.Errorf("metric %s: label %q is not in the bounded set", name, lp.GetName())
				}
			}
		}
	}
	if want := 11; ours != want {
		t.Errorf("supervisor_ families = %d, want %d", ours, want)
	}
}

// TestUnknownValues: label values outside the known sets share one "other"
// series, so a new mechanism or a caller's signal name cannot grow the
// exposition.
func TestUnknownValues(t *testing.T) {
	m := New("dev", Options{})
	m.Event(events.Kind(0), events.Mechanism("dtrace"))
	m.Event(events.Kind(99), events.Mechanism(""))
	m.Lost(events.Mechanism("dtrace"), 5)
	m.Verdict(verdict.Result(0))
	m.Verdict(verdict.Result(200))
	m.Signal("SIGWINCH")
	m.Signal("not a signal")
	m.Signals("SIGTERM", 0)
	m.Signals("SIGTERM", -3)

	mfs := parse(t, scrape(t, m.Handler()))
	tests := []struct {
		name, labels string
		want         float64
	}{
		{EventsTotal, "kind=other,mechanism=other", 2},
		{EventsLostTotal, "mechanism=other", 5},
		{VerdictsTotal, "result=INVALID", 2},
		{SignalsTotal, "signal=other", 2},
		{SignalsTotal, "signal=SIGTERM", 0},
	}
	for _, tt := range tests {
		if got, ok := value(t, mfs, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s{%s} = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// Options left nil: their families are absent, not zero.
	for _, name := range []string{GraphNodes, Claims, LogLinesTotal, LogDroppedTotal} {
		if mfs[name] != nil {
			t.Errorf("family %s present without its callback", name)
		}
	}
	// Series per family are fixed at New: kinds (4+other) x mechanisms (5+other).
	if got, want := len(mfs[EventsTotal].GetMetric()), 5*6; got != want {
		t.Errorf("%s series = %d, want %d", EventsTotal, got, want)
	}
}

// TestScrapeError: a callback that reports the same series twice makes the
// gather fail for that family; the rest is still served and the error is
// counted.
func TestScrapeError(t *testing.T) {
	m := New("dev", Options{Claims: func(emit func(kind, state string, n int)) {
		emit("grant", "running", 1)
		emit("grant", "running", 2)
	}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200 (ContinueOnError)", rec.Code)
	}
	mfs := parse(t, scrape(t, m.Handler()))
	if got, _ := value(t, mfs, ScrapeErrorsTotal, ""); got < 1 {
		t.Errorf("%s = %v, want at least 1", ScrapeErrorsTotal, got)
	}
	if mfs[EventsTotal] == nil {
		t.Errorf("%s missing after a failing collector", EventsTotal)
	}
}

// TestConcurrent updates counters from several goroutines while scraping,
// for the race detector, then checks no increment was lost.
func TestConcurrent(t *testing.T) {
	m := New("dev", testOptions())
	const workers, per = 4, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range per {
				m.Event(events.Exec, events.EBPF)
				m.Verdict(verdict.Gone)
				m.Signal("SIGCONT")
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
			io.Copy(io.Discard, rec.Body)
		}
	})
	wg.Wait()
	mfs := parse(t, scrape(t, m.Handler()))
	for _, tt := range []struct{ name, labels string }{
		{EventsTotal, "kind=exec,mechanism=ebpf"},
		{VerdictsTotal, "result=GONE"},
		{SignalsTotal, "signal=SIGCONT"},
	} {
		if got, _ := value(t, mfs, tt.name, tt.labels); got != workers*per {
			t.Errorf("%s{%s} = %v, want %v", tt.name, tt.labels, got, workers*per)
		}
	}
}

// TestNoAllocs pins the hot-path promise: counting allocates nothing.
func TestNoAllocs(t *testing.T) {
	m := New("dev", Options{})
	calls := []struct {
		name string
		fn   func()
	}{
		{"Event", func() { m.Event(events.Exit, events.Netlink) }},
		{"Event/unknown", func() { m.Event(events.Kind(9), events.Mechanism("x")) }},
		{"Lost", func() { m.Lost(events.EBPF, 3) }},
		{"Verdict", func() { m.Verdict(verdict.Foreign) }},
		{"Signal", func() { m.Signal("SIGKILL") }},
		{"Teardown", func() { m.Teardown(true, true) }},
	}
	for _, c := range calls {
		if n := testing.AllocsPerRun(100, c.fn); n != 0 {
			t.Errorf("%s: %v allocs per call, want 0", c.name, n)
		}
	}
}

func BenchmarkEvent(b *testing.B) {
	m := New("dev", Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.Event(events.Fork, events.EBPF)
	}
}

func BenchmarkEventParallel(b *testing.B) {
	m := New("dev", Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Event(events.Exit, events.Netlink)
		}
	})
}

func BenchmarkVerdict(b *testing.B) {
	m := New("dev", Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.Verdict(verdict.Owned)
	}
}

func BenchmarkScrape(b *testing.B) {
	m := New("dev", testOptions())
	h := m.Handler()
	req := httptest.NewRequest("GET", Path, nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
	}
}
