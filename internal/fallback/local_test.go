package fallback

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// fakeTable is a Snapshotter that returns one snapshot, or fails.
type fakeTable struct {
	snap *Snapshot
	err  error
}

func (f fakeTable) Mechanism() events.Mechanism { return events.SysctlPoll }

func (f fakeTable) Snapshot(context.Context) (*Snapshot, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.snap.Mechanism = events.SysctlPoll
	return f.snap, nil
}

// localTable holds a live process (7), a zombie (8) and a row without a
// start time (9), in microseconds as from sysctl.
func localTable() *Snapshot {
	return table(1, time.Unix(testBtime+60, 0), token.Micro,
		Entry{Pid: 7, PPid: 1, Token: micro(5_000), State: 'S'},
		Entry{Pid: 8, PPid: 1, Token: micro(6_000), State: 'Z'},
		Entry{Pid: 9, PPid: 1})
}

func TestReadToken(t *testing.T) {
	down := fakeTable{err: errors.New("sysctl kern.proc: no")}
	cases := []struct {
		name    string
		s       fakeTable
		pid     int32
		want    token.Token
		wantErr error // a sentinel the error must wrap; nil for any error
		errText string
	}{
		{"live", fakeTable{snap: localTable()}, 7, micro(5_000), nil, ""},
		{"not in the table", fakeTable{snap: localTable()}, 42, token.Token{}, ErrNoProcess, "no process 42"},
		{"zombie", fakeTable{snap: localTable()}, 8, token.Token{}, ErrNoProcess, "process 8 has exited (a zombie awaiting reaping)"},
		{"no start time", fakeTable{snap: localTable()}, 9, token.Token{}, nil, "process 9: no start time in the process table"},
		{"table unreadable", down, 7, token.Token{}, ErrUnavailable, "sysctl: sysctl kern.proc: no"},
	}
	for _, c := range cases {
		got, err := readToken(context.Background(), c.s, c.pid)
		if got != c.want {
			t.Errorf("%s: readToken(%d) = %v, want %v", c.name, c.pid, got, c.want)
		}
		switch {
		case c.errText == "" && err != nil:
			t.Errorf("%s: readToken(%d) error %v, want none", c.name, c.pid, err)
		case c.errText == "":
		case err == nil || err.Error() != c.errText:
			t.Errorf("%s: readToken(%d) error %v, want %q", c.name, c.pid, err, c.errText)
		case c.wantErr != nil && !errors.Is(err, c.wantErr):
			t.Errorf("%s: readToken(%d) error %v, want it to wrap %v", c.name, c.pid, err, c.wantErr)
		case c.wantErr == nil && (errors.Is(err, ErrNoProcess) || errors.Is(err, ErrUnavailable)):
			t.Errorf("%s: readToken(%d) error %v wraps a sentinel, want neither", c.name, c.pid, err)
		}
	}
}

func TestJudgeOnce(t *testing.T) {
	cases := []struct {
		name  string
		s     Snapshotter
		mech  string
		pid   int32
		claim token.Token
		want  verdict.Verdict
	}{
		{"owned", fakeTable{snap: localTable()}, "", 7, micro(5_000),
			verdict.Verdict{Result: verdict.Owned, Mechanism: "sysctl", Observed: micro(5_000)}},
		{"foreign", fakeTable{snap: localTable()}, "auto", 7, micro(4_000),
			verdict.Verdict{Result: verdict.Foreign, Mechanism: "sysctl", Observed: micro(5_000)}},
		{"gone", fakeTable{snap: localTable()}, "", 42, micro(4_000),
			verdict.Verdict{Result: verdict.Gone, Mechanism: "sysctl"}},
		{"no start time", fakeTable{snap: localTable()}, "", 9, micro(4_000),
			verdict.Verdict{Result: verdict.Unverifiable, Mechanism: "sysctl"}},
		{"failed look", fakeTable{err: errors.New("no table")}, "auto", 7, micro(5_000),
			verdict.Verdict{Result: verdict.Unverifiable, Mechanism: "auto", Reason: "sysctl: no table"}},
		{"mechanism that cannot run here", nil, "ebpf", 7, micro(5_000),
			verdict.Verdict{Result: verdict.Unverifiable, Mechanism: "ebpf", Reason: "mechanism ebpf cannot run on this system (sysctl or ps)"}},
	}
	for _, c := range cases {
		got, err := judgeOnce(context.Background(), c.s, c.mech, c.pid, c.claim)
		if err != nil {
			t.Errorf("%s: judgeOnce error %v", c.name, err)
			continue
		}
		want := c.want
		want.Pid, want.Token = c.pid, c.claim
		if want.Reason == "" {
			want.Reason = got.Reason // Judge's own words, tested there
		}
		if got != want {
			t.Errorf("%s: judgeOnce(%q, %d) = %+v, want %+v", c.name, c.mech, c.pid, got, want)
		}
	}
}
