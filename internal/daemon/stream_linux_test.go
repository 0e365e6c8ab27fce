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
// g-1 (owned by uid 1000) and pid 101 its child; pid 200 is in no claim;
// pid 400 is the root of root's claim g-4 and 401 its child.
func testGraph(t testing.TB) (*lineage.Graph, *claimIndex) {
	g := lineage.New(lineage.Config{})
	for _, ev := range []events.Event{
		{Kind: events.Fork, Pid: 100, PPid: 1, Token: tok(100), Time: 1},
		{Kind: events.Fork, Pid: 200, PPid: 1, Token: tok(200), Time: 2},
		{Kind: events.Fork, Pid: 400, PPid: 1, Token: tok(400), Time: 2},
	} {
		g.Apply(&ev)
	}
	for pid, id := range map[int32]string{100: "g-1", 400: "g-4"} {
		if err := g.Admit(pid, tok(uint64(pid)), id); err != nil {
			t.Fatal(err)
		}
	}
	g.Apply(&events.Event{Kind: events.Fork, Pid: 101, PPid: 100, Token: tok(101), ParentToken: tok(100), Time: 3})
	g.Apply(&events.Event{Kind: events.Fork, Pid: 401, PPid: 400, Token: tok(401), ParentToken: tok(400), Time: 3})
	x := newClaimIndex()
	x.set(&store.Claim{ID: "g-1", UID: 1000, State: store.Running, Pid: 100, Token: tok(100)})
	x.set(&store.Claim{ID: "g-4", UID: 0, State: store.Running, Pid: 400, Token: tok(400)})
	return g, x
}

// TestStreamVisibility: root sees every process; a user sees the
// processes of its own claims and its own claims' events, never another
// uid's or a process whose uid is unknown, and its own processes in
// another user's claim without that claim's id (Tree's rule); everyone
// sees losses.
func TestStreamVisibility(t *testing.T) {
	g, claims := testGraph(t)
	var h hub
	root, _ := h.subscribe(viewer{uid: 0, all: true}, 0)
	mine, _ := h.subscribe(viewer{uid: 1000}, 0)
	other, _ := h.subscribe(viewer{uid: 2000}, 0)
	exits, _ := h.subscribe(viewer{uid: 0, all: true}, api.StreamExit|api.StreamFork)
	claimsOnly, _ := h.subscribe(viewer{uid: 1000}, api.StreamClaim)
	now := time.Now()
	for _, ev := range []events.Event{
		{Kind: events.Exec, Pid: 101, PPid: 100, Token: tok(101), Comm: [16]byte{'m', 'a', 'k', 'e'}},
		{Kind: events.Exit, Pid: 200, PPid: 1, Token: tok(200)},
		{Kind: events.Fork, Pid: 300, PPid: 1}, // no token: nobody's
		// root's claim's process that became uid 1000's (runuser)
		{Kind: events.Exec, Pid: 401, PPid: 400, Token: tok(401), Ctx: events.Context{Valid: true, UID: 1000, EUID: 1000, SUID: 1000}},
		{Kind: events.Lost, Mechanism: events.EBPF, Count: 4},
	} {
		h.publishEvent(h.active(), &ev, attributeIn(g, claims, &ev))
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
		{"root", root, "exec:101:uid=1000:claim=g-1 exit:200:uid=-:claim= fork:300:uid=-:claim= exec:401:uid=1000:claim=g-4 lost:ebpf:4 claim:g-1 claim:g-2"},
		{"uid 1000", mine, "exec:101:uid=1000:claim=g-1 exec:401:uid=1000:claim= lost:ebpf:4 claim:g-1"},
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
	slow, _ := h.subscribe(viewer{uid: 0, all: true}, 0)
	ev := events.Event{Kind: events.Fork, Pid: 7, PPid: 1, Token: tok(7)}
	n := 0
	for ; n < 10*streamBuffer/100; n++ {
		h.publishEvent(h.active(), &ev, attribution{})
	}
	rs := take(t, slow)
	if len(rs) < 2 || len(rs) >= n {
		t.Fatalf("took %d records of %d published, want some and a loss", len(rs), n)
	}
	last := rs[len(rs)-1]
	if last.Kind != "lost" || last.Mechanism != "stream" || int(last.Count) != n-(len(rs)-1) {
		t.Errorf("last record %+v, want a stream loss of %d", last, n-(len(rs)-1))
	}
	h.publishEvent(h.active(), &ev, attribution{})
	if rs := take(t, slow); len(rs) != 1 || rs[0].Kind != "fork" {
		t.Errorf("after the loss: %+v, want the next fork", rs)
	}
}

// TestStreamOversizeRecord: an exec whose arguments escape to more than
// a subscriber's whole buffer (32 KiB of control bytes) is delivered, and
// so is what follows; it was counted lost, and the records published
// after it until the reader's next take went with it, whoever's they were.
func TestStreamOversizeRecord(t *testing.T) {
	var h hub
	s, _ := h.subscribe(viewer{uid: 0, all: true}, 0)
	big := events.Event{Kind: events.Exec, Pid: 8, PPid: 1, Token: tok(8), Argv: []string{"x", strings.Repeat("\x01", 32000)}}
	fork := events.Event{Kind: events.Fork, Pid: 9, PPid: 1, Token: tok(9)}
	h.publishEvent(h.active(), &big, attribution{})
	h.publishEvent(h.active(), &fork, attribution{})
	rs := take(t, s)
	var kinds []string
	for _, r := range rs {
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, " ") != "exec fork" {
		t.Fatalf("took %v, want the exec and the fork, nothing lost", kinds)
	}
	if len(rs[0].Argv) != 2 || rs[0].Argv[1] != big.Argv[1] {
		t.Errorf("the exec's arguments came back cut or changed")
	}
	h.publishEvent(h.active(), &fork, attribution{})
	if rs := take(t, s); len(rs) != 1 || rs[0].Kind != "fork" {
		t.Errorf("after the large record: %+v, want the next fork", rs)
	}
}

// TestStreamLargeBurst: execs with arguments at argv_max published in one
// batch, as the event path publishes, with small records between them:
// ten are all delivered (two overflowed the buffer before any reader
// could run, and every record after them was lost); past the
// subscriber's budget for large records some are lost, counted by a lost
// record in their place, and the small records after them are kept.
func TestStreamLargeBurst(t *testing.T) {
	var h hub
	s, _ := h.subscribe(viewer{uid: 0, all: true}, 0)
	long := events.Event{Kind: events.Exec, Pid: 8, PPid: 1, Token: tok(8), Argv: []string{"x", strings.Repeat("a", 32<<10)}}
	fork := events.Event{Kind: events.Fork, Pid: 9, PPid: 1, Token: tok(9)}
	kinds := func(rs []api.StreamRecord) string {
		var k []string
		for _, r := range rs {
			k = append(k, r.Kind)
		}
		return strings.Join(k, " ")
	}
	for range 10 {
		h.publishEvent(h.active(), &long, attribution{})
		h.publishEvent(h.active(), &fork, attribution{})
	}
	if got, want := kinds(take(t, s)), strings.TrimSpace(strings.Repeat("exec fork ", 10)); got != want {
		t.Errorf("a burst of 10 long execs took %q, want %q", got, want)
	}
	if n := h.largeHeld[0].Load() + h.largeHeld[1].Load(); n != 0 {
		t.Errorf("large bytes held after the take: %d, want 0", n)
	}
	n := 2 * largeBudget / (32 << 10)
	for range n {
		h.publishEvent(h.active(), &long, attribution{})
	}
	h.publishEvent(h.active(), &fork, attribution{})
	rs := take(t, s)
	kept := strings.Count(kinds(rs), "exec")
	if kept == 0 || kept >= n || len(rs) != kept+2 || rs[kept].Kind != "lost" || int(rs[kept].Count) != n-kept || rs[kept+1].Kind != "fork" {
		t.Errorf("%d long execs past the budget, then a fork: took %q (lost %d); want some execs, a loss of the rest, the fork", n, kinds(rs), rs[min(kept, len(rs)-1)].Count)
	}
}

// TestStreamLargeAfterClose: a large record put to a subscriber that
// closed after a publish took it from the list charges nothing to its
// side's share. Before, the charge was made and never given back, and
// after enough such races every user's stream lost every large record
// until the daemon restarted.
func TestStreamLargeAfterClose(t *testing.T) {
	var h hub
	long := events.Event{Kind: events.Exec, Pid: 8, PPid: 1, Token: tok(8), Argv: []string{"x", strings.Repeat("a", 32<<10)}}
	for _, uid := range []uint32{0, 1000} {
		s, err := h.subscribe(viewer{uid: uid, all: uid == 0}, 0)
		if err != nil {
			t.Fatal(err)
		}
		subs := h.active() // a publish's list, taken before the Close
		s.Close()
		for range 4 {
			h.publishEvent(subs, &long, attribution{uid: uid, uidOK: true})
		}
		if n := h.largeHeld[0].Load() + h.largeHeld[1].Load(); n != 0 {
			t.Errorf("uid %d: large records put to a closed stream left %d bytes charged, want 0", uid, n)
		}
	}
}

// TestStreamLargeTotal: all subscribers together hold at most largeTotal
// bytes of large records: many streams cannot make the daemon hold
// largeBudget for each. And other users' unread streams, all of them
// full, leave root's stream its own share: before, they took the whole
// total and root's stream lost every long exec after.
func TestStreamLargeTotal(t *testing.T) {
	var h hub
	for range maxStreams {
		if _, err := h.subscribe(viewer{uid: 0, all: true}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := h.subscribe(viewer{uid: 1000, gid: 1000}, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The user's own long execs (wholly its ids): every stream of its
	// (uid 1000) and of root's may show them.
	long := events.Event{Kind: events.Exec, Pid: 8, PPid: 1, Token: tok(8), Argv: []string{"x", strings.Repeat("a", 32<<10)},
		Ctx: events.Context{Valid: true, UID: 1000, EUID: 1000, SUID: 1000, GID: 1000, EGID: 1000, SGID: 1000}}
	for range largeBudget / (32 << 10) {
		h.publishEvent(h.active(), &long, attribution{uid: 1000, uidOK: true})
	}
	users, roots := h.largeHeld[0].Load(), h.largeHeld[1].Load()
	if users > largeShare || users < largeShare/2 || roots > largeShare || roots < largeShare/2 {
		t.Errorf("%d streams of root's and %d of a user's hold %d and %d bytes of large records, want at most %d each (and most of it used)",
			maxStreams, maxStreams, roots, users, largeShare)
	}
	// A root stream, read, subscribed after a user's full ones.
	var h2 hub
	for range maxStreams {
		if _, err := h2.subscribe(viewer{uid: 1000}, 0); err != nil {
			t.Fatal(err)
		}
	}
	audit, err := h2.subscribe(viewer{uid: 0, all: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 24 // within root's stream's largeBudget
	for range n {
		h2.publishEvent(h2.active(), &long, attribution{uid: 1000, uidOK: true})
	}
	got := take(t, audit)
	execs := 0
	for _, r := range got {
		if r.Kind == "exec" {
			execs++
		}
	}
	if execs != n || len(got) != n {
		t.Errorf("root's stream beside %d full streams of a user's took %d records, %d execs; want the %d long execs alone", maxStreams, len(got), execs, n)
	}
}

// TestStreamEnd: a reader waiting is woken by a record and by the daemon
// stopping (io.EOF after what is buffered); a closed subscriber is gone
// from the event path; no subscriber past the cap, or after the stop.
func TestStreamEnd(t *testing.T) {
	var h hub
	s, _ := h.subscribe(viewer{uid: 1000}, 0)
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
	if _, err := h.subscribe(viewer{uid: 0, all: true}, 0); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("subscribe after stop = %v, want ErrUnavailable", err)
	}

	var h2 hub
	for i := 0; i < maxStreams; i++ {
		if _, err := h2.subscribe(viewer{uid: 0, all: true}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h2.subscribe(viewer{uid: 0, all: true}, 0); !errors.Is(err, api.ErrUnavailable) {
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
		if _, err := h.subscribe(viewer{uid: uint32(1000 + i/4)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.subscribe(viewer{uid: 5000}, 0); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("user's subscriber %d = %v, want ErrUnavailable", maxStreams+1, err)
	}
	if _, err := h.subscribe(viewer{uid: 0, all: true}, 0); err != nil {
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
	a, err := h.subscribe(viewer{uid: 1000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.subscribe(viewer{uid: 0, all: true}, 0)
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
			if s, err := h.subscribe(viewer{uid: uint32(2000 + i)}, 0); err == nil {
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
				s, _ := h.subscribe(viewer{uid: uint32(1000 + i%2)}, 0)
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
				h.publishEvent(subs, &ev, attributeIn(g, claims, &ev))
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

// TestStreamWithheld: root's stream is whole; another uid is shown of its
// events what it could read in /proc: the exe and working directory only
// of a process wholly its own (uids and gids), the parent's never, the
// argv of a process or parent only when wholly its own (root's runuser's
// argv, as it was at its exec, was shown: a process that overwrote its
// arguments since shows /proc the new ones; a setuid program's arguments
// were chosen with rights the user lacks), and under hidepid not the
// parent. Each line names what it withheld.
func TestStreamWithheld(t *testing.T) {
	own := events.Context{Valid: true, UID: 1000, EUID: 1000, SUID: 1000, GID: 1000, EGID: 1000, SGID: 1000,
		SID: 400, PGID: 401, SessionLeader: tok(400), GroupLeader: tok(401), PidNS: 4026531836, MntNS: 4026531841}
	setuid := own
	setuid.EUID, setuid.SUID = 0, 0
	setgid := own
	setgid.EGID = 5
	runuser := &events.Desc{Comm: [16]byte{'r', 'u', 'n', 'u', 's', 'e', 'r'}, Exe: "/usr/sbin/runuser",
		Argv: []string{"runuser", "-u", "u", "--", "sh"}, Exec: events.ExecInfo{Cwd: "/root/secret", ArgsCount: 5, ExeDeleted: true},
		Ctx: events.Context{Valid: true}}
	// A parent wholly the user's: its argv, which it may have overwritten
	// since its exec (/proc shows the new one), is the user's to see.
	ownShell := &events.Desc{Comm: [16]byte{'s', 'h'}, Exe: "/bin/sh", Argv: []string{"sh", "-c", "echo hi"},
		Exec: events.ExecInfo{Cwd: "/home/u", ArgsCount: 3}, Ctx: own}
	exec := func(pid int32, c events.Context, cwd string, parent *events.Desc) events.Event {
		return events.Event{Kind: events.Exec, Pid: pid, PPid: 1, Token: tok(uint64(pid)), ParentToken: tok(1),
			Exe: "/usr/bin/echo", Argv: []string{"echo", "hi"}, Exec: events.ExecInfo{Cwd: cwd, ArgsCount: 2, ExeDeleted: true, CwdDeleted: true},
			Ctx: c, Parent: parent}
	}
	evs := []events.Event{
		exec(501, own, "/home/u", runuser),     // the user's, under root's runuser
		exec(502, setuid, "/root/secret", nil), // a setuid program's exec after a chdir
		exec(503, setgid, "/home/u", nil),      // a setgid program's
		exec(504, own, "/home/u", nil),         // wholly the user's: nothing withheld
		{Kind: events.Fork, Pid: 505, PPid: 502, Token: tok(505), ParentToken: tok(502), Ctx: setuid}, // the setuid program's child
		{Kind: events.Exit, Pid: 501, PPid: 1, Token: tok(501), ParentToken: tok(1), Parent: runuser},
		exec(506, own, "/home/u", ownShell), // the user's, under the user's own shell
	}
	var h hub
	subs := subscribeAll(t, &h, map[string]viewer{
		"root":            {uid: 0, all: true},
		"user":            {uid: 1000, gid: 1000},
		"user, hidepid":   {uid: 1000, gid: 1000, hidden: true},
		"user, other gid": {uid: 1000, gid: 7},
	})
	for i := range evs {
		a := attribution{uid: 1000, uidOK: true}
		h.publishEvent(h.active(), &evs[i], a)
	}
	// Each record as: pid, then the keys it has of exe, working_directory,
	// their deletion marks, argv, args_count, parent_token, interactive,
	// pid_ns, mnt_ns, the leaders' entity_id (not null), parent and its
	// comm, exe, its mark, working_directory, argv and interactive, then
	// withheld. A mark goes with its path.
	shown := func(s *subscriber) string {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		b, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for l := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("record %q: %v", l, err)
			}
			f := []string{fmt.Sprint(r["kind"], r["pid"])}
			for _, k := range []string{"exe", "exe_deleted", "working_directory", "working_directory_deleted", "argv", "args_count",
				"parent_token", "interactive", "pid_ns", "mnt_ns"} {
				if _, ok := r[k]; ok {
					f = append(f, k)
				}
			}
			for _, k := range []string{"session_leader", "group_leader"} {
				if l, ok := r[k].(map[string]any); ok && l["entity_id"] != nil {
					f = append(f, k+".entity_id")
				}
			}
			if p, ok := r["parent"].(map[string]any); ok {
				f = append(f, "parent")
				for _, k := range []string{"comm", "exe", "exe_deleted", "working_directory", "argv", "interactive"} {
					if _, ok := p[k]; ok {
						f = append(f, "parent."+k)
					}
				}
			}
			if w, ok := r["withheld"].([]any); ok {
				f = append(f, fmt.Sprint("withheld", w))
			}
			out = append(out, strings.Join(f, " "))
		}
		return strings.Join(out, "\n")
	}
	// Of each event's context: its parent token, interactive, pid_ns,
	// mnt_ns and leaders' tokens (ctx).
	const ctx = "parent_token interactive pid_ns mnt_ns session_leader.entity_id group_leader.entity_id"
	whole := strings.Join([]string{
		"exec501 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx + " parent parent.comm parent.exe parent.exe_deleted parent.working_directory parent.argv parent.interactive",
		"exec502 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx,
		"exec503 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx,
		"exec504 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx,
		"fork505 " + ctx,
		"exit501 parent_token parent parent.comm parent.exe parent.exe_deleted parent.working_directory parent.argv parent.interactive",
		"exec506 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx + " parent parent.comm parent.exe parent.working_directory parent.argv parent.interactive",
	}, "\n")
	for _, tc := range []struct{ name, want string }{
		{"root", whole},
		{"user", strings.Join([]string{
			"exec501 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx + " parent parent.comm withheld[parent.exe parent.working_directory parent.argv parent.interactive]",
			"exec502 parent_token session_leader.entity_id group_leader.entity_id withheld[exe working_directory argv interactive pid_ns mnt_ns]",
			"exec503 parent_token session_leader.entity_id group_leader.entity_id withheld[exe working_directory argv interactive pid_ns mnt_ns]",
			"exec504 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx,
			"fork505 parent_token session_leader.entity_id group_leader.entity_id withheld[interactive pid_ns mnt_ns]",
			"exit501 parent_token parent parent.comm withheld[parent.exe parent.working_directory parent.argv parent.interactive]",
			"exec506 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx + " parent parent.comm parent.argv withheld[parent.exe parent.working_directory parent.interactive]",
		}, "\n")},
		{"user, hidepid", strings.Join([]string{
			"exec501 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx + " withheld[parent]",
			"exec502 withheld[exe working_directory argv interactive pid_ns mnt_ns parent_token session_leader.entity_id group_leader.entity_id]",
			"exec503 withheld[exe working_directory argv interactive pid_ns mnt_ns parent_token session_leader.entity_id group_leader.entity_id]",
			"exec504 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx,
			"fork505 withheld[interactive pid_ns mnt_ns parent_token session_leader.entity_id group_leader.entity_id]",
			"exit501 withheld[parent parent_token]", // no context: not shown to be wholly the user's
			"exec506 exe exe_deleted working_directory working_directory_deleted argv args_count " + ctx + " withheld[parent]",
		}, "\n")},
		{"user, other gid", strings.Join([]string{
			"exec501 parent_token session_leader.entity_id group_leader.entity_id parent parent.comm " +
				"withheld[exe working_directory argv parent.exe parent.working_directory parent.argv interactive pid_ns mnt_ns parent.interactive]",
			"exec502 parent_token session_leader.entity_id group_leader.entity_id withheld[exe working_directory argv interactive pid_ns mnt_ns]",
			"exec503 parent_token session_leader.entity_id group_leader.entity_id withheld[exe working_directory argv interactive pid_ns mnt_ns]",
			"exec504 parent_token session_leader.entity_id group_leader.entity_id withheld[exe working_directory argv interactive pid_ns mnt_ns]",
			"fork505 parent_token session_leader.entity_id group_leader.entity_id withheld[interactive pid_ns mnt_ns]",
			"exit501 parent_token parent parent.comm withheld[parent.exe parent.working_directory parent.argv parent.interactive]",
			"exec506 parent_token session_leader.entity_id group_leader.entity_id parent parent.comm " +
				"withheld[exe working_directory argv parent.exe parent.working_directory parent.argv interactive pid_ns mnt_ns parent.interactive]",
		}, "\n")},
	} {
		if got := shown(subs[tc.name]); got != tc.want {
			t.Errorf("%s is shown:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// subscribeAll subscribes each viewer to h, by name.
func subscribeAll(t *testing.T, h *hub, viewers map[string]viewer) map[string]*subscriber {
	t.Helper()
	subs := map[string]*subscriber{}
	for name, v := range viewers {
		s, err := h.subscribe(v, 0)
		if err != nil {
			t.Fatal(err)
		}
		subs[name] = s
	}
	return subs
}

// TestWhollyOf: a process is wholly a user's when all six ids are its and
// it is dumpable: one that became the user's in place (no exec; /proc
// shows it not dumpable) is not, nor one whose ids are not known.
func TestWhollyOf(t *testing.T) {
	own := events.Context{Valid: true, UID: 1000, EUID: 1000, SUID: 1000, GID: 1000, EGID: 1000, SGID: 1000}
	undumpable, otherSaved, noIDs := own, own, own
	undumpable.Undumpable = true
	otherSaved.SUID = 0
	noIDs.Absent = events.CtxIDs
	for _, tc := range []struct {
		name string
		c    events.Context
		want bool
	}{
		{"own", own, true},
		{"own ids, not dumpable", undumpable, false},
		{"saved uid root's", otherSaved, false},
		{"ids not known", noIDs, false},
		{"no context", events.Context{}, false},
	} {
		if got := whollyOf(&tc.c, 1000, 1000); got != tc.want {
			t.Errorf("%s: whollyOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}
