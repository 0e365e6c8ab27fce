package logfeed

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// stuckLogger returns a logger of every process event with a buffer of
// buffer lines, whose drain goroutine is stuck writing the fork of pid 1
// until w.release is closed: the buffer fills.
func stuckLogger(t *testing.T, buffer int) (*Logger, *blockingWriter) {
	t.Helper()
	w := newBlockingWriter()
	l, _ := newTestLogger(t, Config{Writer: w, BufferLines: buffer, ProcessEvents: AllKinds})
	ev := events.Event{Kind: events.Fork, Pid: 1, Mechanism: events.EBPF}
	l.Event(&ev)
	<-w.entered
	return l, w
}

// TestPriorityOverProcessEvents: behind a blocked sink, a buffer full of
// process events gives way to audit, verdict and signal lines; those are
// all written once the sink works, in the order they were logged, and
// the drops are counted (Stats, log_lines_dropped) as process events. In
// a buffer with no process event left, the next audit line is dropped
// and counted as audit.
func TestPriorityOverProcessEvents(t *testing.T) {
	const buffer = 8
	l, w := stuckLogger(t, buffer)
	ev := events.Event{Kind: events.Fork, Mechanism: events.EBPF}
	for i := range 3 * buffer {
		ev.Pid = int32(i + 2)
		l.Event(&ev)
	}
	want := []string{}
	for i := range buffer {
		switch i % 3 {
		case 0:
			l.Request(Request{Action: ActionKillRequested, UID: 1000, Pid: int32(100 + i)})
			want = append(want, ActionKillRequested)
		case 1:
			l.Verdict(verdict.Verdict{Pid: int32(100 + i), Result: verdict.Gone})
			want = append(want, ActionVerdict)
		case 2:
			l.Signal(Signal{Pid: int32(100 + i), Signal: "SIGKILL", Mechanism: "pidfd"})
			want = append(want, ActionSignalSent)
		}
	}
	l.Request(Request{Action: ActionReapRequested, UID: 0, Pid: 999}) // no process event left to give way
	st := l.Stats()
	if want := (Drops{ProcessEvents: 3 * buffer, Audit: 1}); st.DroppedBy != want || st.Dropped != want.total() {
		t.Fatalf("Stats %+v, want drops %+v", st, want)
	}
	close(w.release)
	flush(t, l)
	var got []string
	var byClass [3]int64
	for _, line := range w.lines.lines(t) {
		switch a := getString(line, "event.action"); a {
		case ActionProcessStarted:
			if pid, _ := getInt(line, "process.pid"); pid != 1 {
				t.Errorf("process event of pid %d written: it should have given way", pid)
			}
		case ActionLogLinesDropped:
			for i, k := range []string{"process_events", "audit", "verdicts"} {
				byClass[i], _ = getInt(line, "supervisor.dropped."+k)
			}
		default:
			got = append(got, a)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %s, want %s (order kept)", i, got[i], want[i])
		}
	}
	if byClass != [3]int64{3 * buffer, 1, 0} {
		t.Errorf("log_lines_dropped: process events, audit, verdicts = %v, want %d, 1, 0", byClass, 3*buffer)
	}
}

// TestFairDropsByUID: behind a blocked sink, one uid's storm fills the
// buffer; another uid's process events then take the places of the
// storm's newest, up to an even share, and the storm's own are dropped:
// a user cannot push another's lines out of the feed by forking faster.
// A line of another class gives way to no one's but the uid holding most.
func TestFairDropsByUID(t *testing.T) {
	const buffer = 8
	l, w := stuckLogger(t, buffer)
	const stormUID, otherUID = 1000, 2000
	storm := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Ctx: events.Context{Valid: true, UID: stormUID}}
	for i := range 3 * buffer {
		storm.Pid = int32(100 + i)
		l.Event(&storm)
	}
	other := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Ctx: events.Context{Valid: true, UID: otherUID}}
	for i := range buffer {
		other.Pid = int32(500 + i)
		l.Event(&other)
	}
	l.Request(Request{Action: ActionKillRequested, UID: otherUID, Pid: 999})
	close(w.release)
	flush(t, l)
	var stormPids, otherPids []int64
	requests := 0
	var byUID []any
	for _, line := range w.lines.lines(t) {
		switch getString(line, "event.action") {
		case ActionLogLinesDropped:
			sup, _ := line["supervisor"].(map[string]any)
			dropped, _ := sup["dropped"].(map[string]any)
			byUID, _ = dropped["process_events_by_uid"].([]any)
		case ActionProcessStarted:
			pid, _ := getInt(line, "process.pid")
			switch {
			case pid >= 500:
				otherPids = append(otherPids, pid)
			case pid >= 100:
				stormPids = append(stormPids, pid)
			}
		case ActionKillRequested:
			requests++
		}
	}
	// The buffer of 8: the storm's first 8, then the other uid's first 4
	// taking the places of the storm's newest (4 each), then the request
	// taking one of the storm's (the lower uid at a tie).
	if want := []int64{100, 101, 102}; !slices.Equal(stormPids, want) {
		t.Errorf("storm's lines written: pids %v, want %v (its oldest, down to less than an even share)", stormPids, want)
	}
	if want := []int64{500, 501, 502, 503}; !slices.Equal(otherPids, want) {
		t.Errorf("other uid's lines written: pids %v, want %v (its first, up to an even share)", otherPids, want)
	}
	if requests != 1 {
		t.Errorf("%d kill_requested lines written, want 1", requests)
	}
	// The drop line names who lost lines, the storm first.
	want := []string{`{"lines":21,"uid":"1000"}`, `{"lines":4,"uid":"2000"}`}
	var got []string
	for _, u := range byUID {
		b, _ := json.Marshal(u)
		got = append(got, string(b))
	}
	if !slices.Equal(got, want) {
		t.Errorf("log_lines_dropped's process_events_by_uid = %v, want %v", got, want)
	}
	if st := l.Stats(); st.DroppedBy.ProcessEvents != 3*buffer+buffer-3-4 {
		t.Errorf("process events dropped %d, want %d", st.DroppedBy.ProcessEvents, 3*buffer+buffer-3-4)
	}
}
