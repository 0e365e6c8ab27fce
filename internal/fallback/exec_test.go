package fallback

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// fakePS writes an executable shell script standing in for ps. It writes
// with syscall.ForkLock held, as os/exec forks under it: a parallel test
// forking while the file is open for writing would give its child the
// descriptor until that child's exec, and an exec of the script meanwhile
// fails with ETXTBSY ("text file busy", seen in CI).
func fakePS(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ps")
	syscall.ForkLock.Lock()
	err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755)
	syscall.ForkLock.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// goodTable prints a table a sane ps would: pid 1, the caller ($PPID), ps
// itself ($$), and the rows in $ROWS_FILE if it exists.
const goodTable = `printf '    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\n'
printf '%5d %5d S    Sun Nov 29 16:06:00 2026 supervisor run\n' $PPID 1
printf '%5d %5d R    Sun Nov 29 16:06:01 2026 ps -A\n' $$ $PPID`

func TestPSBroken(t *testing.T) {
	tests := []struct {
		name string
		body string // "" for a missing binary
		opts PSOptions
		want []error
	}{
		{"missing binary", "", PSOptions{}, []error{ErrPSFailed}},
		{"non-zero exit", goodTable + "\nexit 1", PSOptions{}, []error{ErrPSFailed}},
		{"killed by a signal", goodTable + "\nkill -9 $$", PSOptions{}, []error{ErrPSFailed}},
		{"garbage", "echo 'ps: illegal option -- w'", PSOptions{}, []error{ErrImplausibleTable}},
		{"empty output", "exit 0", PSOptions{}, []error{ErrImplausibleTable}},
		{"timeout", "exec sleep 60", PSOptions{Timeout: 100 * time.Millisecond}, []error{ErrPSFailed, context.DeadlineExceeded}},
		{"timeout with output", goodTable + "\nexec sleep 60", PSOptions{Timeout: 100 * time.Millisecond}, []error{ErrPSFailed, context.DeadlineExceeded}},
		{"over the size bound", "while :; do printf '    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\\n'; done", PSOptions{MaxOutput: 64 << 10}, []error{ErrOutputTooLarge}},
		{"no pid 1", `printf '%5d %5d S    Sun Nov 29 16:06:00 2026 supervisor\n' $PPID 1`, PSOptions{}, []error{ErrImplausibleTable}},
		{"ps not in its own table", `printf '    1     0 Ss   Sun Nov 29 16:05:42 2026 /sbin/init\n%5d     1 S    Sun Nov 29 16:06:00 2026 supervisor\n' $PPID`, PSOptions{}, []error{ErrImplausibleTable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			if tt.body == "" {
				opts.Path = filepath.Join(t.TempDir(), "no-such-ps")
			} else {
				opts.Path = fakePS(t, tt.body)
			}
			s, err := NewPS(opts).Snapshot(context.Background())
			if s != nil || err == nil {
				t.Fatalf("Snapshot() = %v, %v; want an error", s, err)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Snapshot() error %q does not wrap %q", err, w)
				}
			}
			claim := Claim{Pid: 4242, Token: token.Token{Boot: testBoot, Start: 1, Prec: token.Second}, Since: time.Now()}
			if r, _ := Judge(claim, s, nil); r != verdict.Unverifiable {
				t.Errorf("Judge after a failed ps = %v, want UNVERIFIABLE", r)
			}
		})
	}
}

func TestPSFakeGood(t *testing.T) {
	s, err := NewPS(PSOptions{Path: fakePS(t, goodTable)}).Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() error: %v", err)
	}
	if got := len(s.Entries); got != 2 {
		t.Errorf("Snapshot(): %d entries, want 2 (pid 1 and self; the ps row is dropped)", got)
	}
	if s.Seq != 1 || s.Taken.IsZero() || s.Mechanism != events.PSPoll {
		t.Errorf("Snapshot() Seq %d Taken %v Mechanism %q", s.Seq, s.Taken, s.Mechanism)
	}
}

// A poller over a ps that fails delivers a Lost gap, never exits, and breaks
// continuity; after recovery, a pid really missing is an inferred exit.
func TestPollerFailedPoll(t *testing.T) {
	dir := t.TempDir()
	mode := filepath.Join(dir, "mode")
	rows := filepath.Join(dir, "rows")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(mode, "ok")
	write(rows, " 4242     1 S    Sun Nov 29 16:06:05 2026 sleep 100\n")
	ps := fakePS(t, `[ "$(cat `+mode+`)" = ok ] || exit 3
`+goodTable+`
cat `+rows+` 2>/dev/null`)
	p, err := NewPoller(context.Background(), NewPS(PSOptions{Path: ps}), PollerOptions{Interval: time.Millisecond, MaxGap: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base := p.latest()
	tok := base.Lookup(4242).Token
	since := base.Taken.Add(-time.Millisecond)

	write(mode, "fail")
	var ev events.Event
	if err := p.Read(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != events.Lost || ev.Mechanism != events.PSPoll {
		t.Fatalf("Read after a failed ps = %v from %q, want a lost event from ps", ev.Kind, ev.Mechanism)
	}
	if got := p.Polls(); got.Failures != 1 || got.Polls != 2 || !strings.Contains(got.LastError, "exit status 3") {
		t.Errorf("Polls() = %+v, want 2 polls, 1 failure saying ps exited 3", got)
	}
	if got := p.Stats(); got.LostReports != 1 || got.Events != 0 {
		t.Errorf("Stats() = %+v, want 1 lost report, 0 events", got)
	}
	if p.latest() != nil {
		t.Error("Latest() after a failed poll is not nil")
	}
	if r, _ := Judge(Claim{4242, tok, since}, p.latest(), p.Continuity()); r != verdict.Unverifiable {
		t.Errorf("Judge after a failed poll = %v, want UNVERIFIABLE", r)
	}

	// ps works again, and 4242 is gone for real.
	write(mode, "ok")
	write(rows, "")
	if err := p.Read(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != events.Exit || ev.Pid != 4242 || !ev.Inferred || ev.Token != tok || ev.Status != StatusUnknown {
		t.Errorf("Read after recovery = %+v, want an inferred exit of 4242 with unknown status", ev)
	}
	if _, ok := ev.Exited(); ok {
		t.Error("an inferred exit claims an exit code")
	}
	if r, _ := Judge(Claim{4242, tok, since}, p.latest(), p.Continuity()); r != verdict.Gone {
		t.Errorf("Judge after recovery = %v, want GONE", r)
	}

	// Close ends a blocked Read.
	done := make(chan error, 1)
	go func() { done <- p.Read(&ev) }()
	p.Close()
	if err := <-done; !errors.Is(err, events.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
}

func TestNewPollerFailedBaseline(t *testing.T) {
	p, err := NewPoller(context.Background(), NewPS(PSOptions{Path: fakePS(t, "exit 1")}), PollerOptions{})
	if p != nil || !errors.Is(err, ErrPSFailed) {
		t.Errorf("NewPoller(failing ps) = %v, %v; want nil, ErrPSFailed", p, err)
	}
}

func TestOrderParentsFirst(t *testing.T) {
	ev := func(pid, ppid int32, start uint64) events.Event {
		return events.Event{Kind: events.Fork, Pid: pid, PPid: ppid, Token: sec(start)}
	}
	f := []events.Event{ev(30, 20, 5), ev(10, 1, 5), ev(20, 10, 5), ev(5, 1, 7), ev(40, 41, 5), ev(41, 40, 5)}
	orderParentsFirst(f)
	pos := map[int32]int{}
	for i, e := range f {
		pos[e.Pid] = i
	}
	if len(pos) != 6 {
		t.Fatalf("orderParentsFirst lost or duplicated events: %v", f)
	}
	for _, pc := range [][2]int32{{10, 20}, {20, 30}} {
		if pos[pc[0]] > pos[pc[1]] {
			t.Errorf("orderParentsFirst: %d after its child %d: %v", pc[0], pc[1], f)
		}
	}
	if pos[5] != 5 {
		t.Errorf("orderParentsFirst: the latest start is not last: %v", f)
	}
}
