package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
)

// take reads what a subscriber has, without waiting, as records.
func take(t *testing.T, s *subscriber) []api.StreamRecord {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, err := s.Next(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []api.StreamRecord
	for l := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r api.StreamRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

func tok(start uint64) token.Token { return token.Token{Start: start, Prec: token.Ticks} }

// testGraph is a lineage graph where pid 100 is the admitted root of claim
// g-1 (owned by uid 1000) and pid 101 its child; pid 200 is in no claim.
func testGraph(t testing.TB) (*lineage.Graph, *claimIndex) {
	g := lineage.New(lineage.Config{})
	for _, ev := range []events.Event{
		{Kind: events.Fork, Pid: 100, PPid: 1, Token: tok(100), Time: 1},
		{Kind: events.Fork, Pid: 200, PPid: 1, Token: tok(200), Time: 2},
	} {
		g.Apply(&ev)
	}
	if err := g.Admit(100, tok(100), "g-1"); err != nil {
		t.Fatal(err)
	}
	g.Apply(&events.Event{Kind: events.Fork, Pid: 101, PPid: 100, Token: tok(101), ParentToken: tok(100), Time: 3})
	x := newClaimIndex()
	x.set(&store.Claim{ID: "g-1", UID: 1000, State: store.Running, Pid: 100, Token: tok(100)})
	return g, x
}

// TestStreamVisibility: root sees every process; a user sees the
// processes of its own claims and its own claims' events, never another
// uid's or a process whose uid is unknown; everyone sees losses.
func TestStreamVisibility(t *testing.T) {
	g, claims := testGraph(t)
	var h hub
	root, _ := h.subscribe(0, true, 0)
	mine, _ := h.subscribe(1000, false, 0)
	other, _ := h.subscribe(2000, false, 0)
	exits, _ := h.subscribe(0, true, api.StreamExit|api.StreamFork)
	claimsOnly, _ := h.subscribe(1000, false, api.StreamClaim)
	now := time.Now()
	for _, ev := range []events.Event{
		{Kind: events.Exec, Pid: 101, PPid: 100, Token: tok(101), Comm: [16]byte{'m', 'a', 'k', 'e'}},
		{Kind: events.Exit, Pid: 200, PPid: 1, Token: tok(200)},
		{Kind: events.Fork, Pid: 300, PPid: 1}, // no token: nobody's
		{Kind: events.Lost, Mechanism: events.EBPF, Count: 4},
	} {
		h.publishEvent(h.active(), &ev, attributeIn(g, claims, &ev), now)
	}
	h.publishClaim(&logfeed.ClaimEvent{Action: logfeed.ActionClaimState, ClaimID: "g-1", UID: 1000, From: "running", State: "releasing"}, now)
	h.publishClaim(&logfeed.ClaimEvent{Action: logfeed.ActionClaimState, ClaimID: "g-2", UID: 2000, From: "running", State: "releasing"}, now)

	seen := func(rs []api.StreamRecord) string {
		var s []string
		for _, r := range rs {
			switch {
			case r.Kind == "claim":
				s = append(s, "claim:"+r.Claim)
			case r.Kind == "lost":
				s = append(s, fmt.Sprintf("lost:%s:%d", r.Mechanism, r.Count))
			default:
				uid := "-"
				if r.UID != nil {
					uid = fmt.Sprint(*r.UID)
				}
				s = append(s, fmt.Sprintf("%s:%d:uid=%s:claim=%s", r.Kind, r.Pid, uid, r.Claim))
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name string
		s    *subscriber
		want string
	}{
		{"root", root, "exec:101:uid=1000:claim=g-1 exit:200:uid=-:claim= fork:300:uid=-:claim= lost:ebpf:4 claim:g-1 claim:g-2"},
		{"uid 1000", mine, "exec:101:uid=1000:claim=g-1 lost:ebpf:4 claim:g-1"},
		{"uid 2000", other, "lost:ebpf:4 claim:g-2"},
		{"root, exits and forks", exits, "exit:200:uid=-:claim= fork:300:uid=-:claim= lost:ebpf:4"},
		{"uid 1000, claims", claimsOnly, "lost:ebpf:4 claim:g-1"},
	} {
		if got := seen(take(t, tc.s)); got != tc.want {
			t.Errorf("%s sees %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStreamLoss: a subscriber that does not read loses what does not fit,
// counted; its next take has what fitted, then one lost record, and the
// stream goes on. Publishing never waits for it.
func TestStreamLoss(t *testing.T) {
	var h hub
	slow, _ := h.subscribe(0, true, 0)
	ev := events.Event{Kind: events.Fork, Pid: 7, PPid: 1, Token: tok(7)}
	n := 0
	for ; n < 10*streamBuffer/100; n++ {
		h.publishEvent(h.active(), &ev, attribution{}, time.Now())
	}
	rs := take(t, slow)
	if len(rs) < 2 || len(rs) >= n {
		t.Fatalf("took %d records of %d published, want some and a loss", len(rs), n)
	}
	last := rs[len(rs)-1]
	if last.Kind != "lost" || last.Mechanism != "stream" || int(last.Count) != n-(len(rs)-1) {
		t.Errorf("last record %+v, want a stream loss of %d", last, n-(len(rs)-1))
	}
	h.publishEvent(h.active(), &ev, attribution{}, time.Now())
	if rs := take(t, slow); len(rs) != 1 || rs[0].Kind != "fork" {
		t.Errorf("after the loss: %+v, want the next fork", rs)
	}
}

// TestStreamEnd: a reader waiting is woken by a record and by the daemon
// stopping (io.EOF after what is buffered); a closed subscriber is gone
// from the event path; no subscriber past the cap, or after the stop.
func TestStreamEnd(t *testing.T) {
	var h hub
	s, _ := h.subscribe(1000, false, 0)
	got := make(chan error, 1)
	go func() {
		b, err := s.Next(context.Background())
		if err == nil && !strings.Contains(string(b), `"claim":"g-9"`) {
			err = fmt.Errorf("took %q", b)
		}
		got <- err
	}()
	h.publishClaim(&logfeed.ClaimEvent{ClaimID: "g-9", UID: 1000}, time.Now())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	go func() { _, err := s.Next(context.Background()); got <- err }()
	h.close()
	if err := <-got; !errors.Is(err, io.EOF) {
		t.Errorf("Next after close = %v, want io.EOF", err)
	}
	s.Close()
	if n := len(h.active()); n != 0 {
		t.Errorf("%d subscribers after Close, want 0", n)
	}
	if _, err := h.subscribe(0, true, 0); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("subscribe after stop = %v, want ErrUnavailable", err)
	}

	var h2 hub
	for i := 0; i < maxStreams; i++ {
		if _, err := h2.subscribe(0, true, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h2.subscribe(0, true, 0); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("subscriber %d = %v, want ErrUnavailable", maxStreams+1, err)
	}
}

// TestStreamsOfUsersLeaveRoot: the streams of other uids, together at
// their cap, leave root its own, as the API's gate leaves root its own
// connections. Before, 16 uids at 4 streams each locked root out of the
// event stream.
func TestStreamsOfUsersLeaveRoot(t *testing.T) {
	var h hub
	for i := range maxStreams {
		if _, err := h.subscribe(uint32(1000+i/4), false, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.subscribe(5000, false, 0); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("user's subscriber %d = %v, want ErrUnavailable", maxStreams+1, err)
	}
	if _, err := h.subscribe(0, true, 0); err != nil {
		t.Errorf("root's subscriber with users' streams at their cap: %v", err)
	}
}

// TestStreamChangedFollowsSubscribers: the hub tells its changed callback
// (the tracker's ExecContextChanged) of every subscriber that comes or
// goes, after the change, so that eBPF captures exec strings exactly while
// a stream is open. Subscribers from many goroutines at once leave the
// last call seeing none.
func TestStreamChangedFollowsSubscribers(t *testing.T) {
	var h hub
	var mu sync.Mutex
	var seen []int
	changed := func() {
		n := 0
		if h.streaming() { // what the daemon's Options.ExecContext asks
			n = len(h.active())
		}
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
	}
	h.changed.Store(&changed)
	a, err := h.subscribe(1000, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.subscribe(0, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if h.streaming() {
		t.Fatal("streaming() after every subscriber left: the exec strings would be captured for no one")
	}
	if want := []int{1, 2, 1, 0}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("changed saw %v subscribers, want %v", seen, want)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, err := h.subscribe(uint32(2000+i), false, 0); err == nil {
				s.Close()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4+32 || seen[len(seen)-1] != 0 {
		t.Fatalf("after 16 streams opened and closed at once: %d calls, the last saw %d subscribers, want 36 and 0", len(seen), seen[len(seen)-1])
	}
}

// BenchmarkStreamEventPath is the stream's cost on the event path (what
// onEventStream adds to onEvent) with 0, 1 and 8 subscribers reading as
// fast as they can, and with 8 that never read (every event lost).
func BenchmarkStreamEventPath(b *testing.B) {
	g, claims := testGraph(b)
	ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 101, PPid: 100, Token: tok(101), ParentToken: tok(100),
		Comm: [16]byte{'m', 'a', 'k', 'e'}, Exe: "/usr/bin/make", Time: 12345}
	for _, bc := range []struct {
		subs    int
		reading bool
	}{{0, true}, {1, true}, {8, true}, {8, false}} {
		b.Run(fmt.Sprintf("subscribers=%d/reading=%v", bc.subs, bc.reading), func(b *testing.B) {
			var h hub
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := 0; i < bc.subs; i++ {
				s, _ := h.subscribe(uint32(1000+i%2), false, 0)
				if bc.reading {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							if _, err := s.Next(ctx); err != nil {
								return
							}
						}
					}()
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				subs := h.active()
				if len(subs) == 0 {
					continue
				}
				h.publishEvent(subs, &ev, attributeIn(g, claims, &ev), time.Now())
			}
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkStreamAttribute is attribution alone (the graph lookups), for an
// event that carries its uid and for one that does not (an exit).
func BenchmarkStreamAttribute(b *testing.B) {
	g, claims := testGraph(b)
	for _, bc := range []struct {
		name string
		ev   events.Event
	}{
		{"ctx", events.Event{Kind: events.Exec, Pid: 101, PPid: 100, Token: tok(101), Ctx: events.Context{Valid: true, UID: 1000}}},
		{"exit", events.Event{Kind: events.Exit, Pid: 101, PPid: 100, Token: tok(101)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a := attributeIn(g, claims, &bc.ev); a.claim != "g-1" {
					b.Fatalf("attributed to %+v", a)
				}
			}
		})
	}
}
