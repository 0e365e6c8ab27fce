package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// killBackend answers every kill with err, and counts them.
type killBackend struct {
	api.Backend
	err   error
	kills atomic.Int32
}

func (b *killBackend) Kill(ctx context.Context, p api.Peer, r *api.ClaimRequest) (actions.Outcome, error) {
	b.kills.Add(1)
	return actions.Outcome{}, b.err
}

func serve(t *testing.T, b api.Backend) *api.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := api.NewServer(b, nil)
	go s.Serve(l)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	c := api.NewClient(sock)
	t.Cleanup(c.Close)
	return c
}

// TestKillRefusalIsTheAnswer: each refusal of the daemon is returned with
// its exit code and nothing runs here; only "not held" (and no daemon)
// lets the local path run, which says so.
func TestKillRefusalIsTheAnswer(t *testing.T) {
	// A pid no process has: the local path, when it runs, finds nothing
	// and signals nothing.
	const pid = 1 << 22
	tok := token.Token{Start: 1, Prec: token.Ticks}
	tests := []struct {
		name  string
		err   error
		local bool
		code  int
	}{
		{"another user's", fmt.Errorf("held for uid 1001: %w", api.ErrNotYours), false, ExitNoPerm},
		{"protected", fmt.Errorf("the daemon: %w", api.ErrProtected), false, ExitNoPerm},
		{"forbidden", api.ErrForbidden, false, ExitNoPerm},
		{"conflict", api.ErrConflict, false, ExitUnverifiable},
		{"unavailable", api.ErrUnavailable, false, ExitTempFail},
		{"over quota", api.ErrQuota, false, ExitTempFail},
		{"not held", fmt.Errorf("%d: %w", pid, api.ErrNotHeld), true, ExitNoInput},
	}
	for _, tt := range tests {
		for _, heldOnly := range []bool{false, true} {
			b := &killBackend{err: tt.err}
			c := serve(t, b)
			var note bytes.Buffer
			_, err := Kill(context.Background(), c, "", pid, tok, 0, heldOnly, &note, nil)
			ran := strings.Contains(note.String(), "here")
			local := tt.local && !heldOnly // --held-only: never here
			if b.kills.Load() != 1 || ran != local {
				t.Errorf("%s (held only %v): daemon asked %d times, local path ran %v (note %q), want once and %v",
					tt.name, heldOnly, b.kills.Load(), ran, note.String(), local)
			}
			if local {
				if !strings.Contains(note.String(), "does not hold") {
					t.Errorf("%s: note %q does not say why it ran here", tt.name, note.String())
				}
				continue
			}
			if code, _ := Exit(err); code != tt.code {
				t.Errorf("%s (held only %v): Kill() = %v, exit %d, want %d", tt.name, heldOnly, err, code, tt.code)
			}
		}
	}
}

func TestExit(t *testing.T) {
	tests := []struct {
		err  error
		code int
	}{
		{fmt.Errorf("x: %w", ErrInterrupted), ExitInterrupted},
		{fmt.Errorf("x: %w", ErrTimeout), ExitTempFail},
		{fmt.Errorf("x: %w", api.ErrSocketDenied), ExitNoPerm},
		{fmt.Errorf("x: %w", api.ErrNoDaemon), ExitUnavailable},
		{fmt.Errorf("x: %w: %w", api.ErrNoDaemon, api.ErrNotDaemon), ExitUnavailable},
		{fmt.Errorf("x: %w", local.ErrNoProcess), ExitNoInput},
		{&api.Error{Status: 403, Code: api.CodeNotYours, Message: "m"}, ExitNoPerm},
		{&api.Error{Status: 404, Code: api.CodeNotHeld, Message: "m"}, ExitNoInput},
		{&api.Error{Status: 409, Code: api.CodeConflict, Message: "m"}, ExitUnverifiable},
		{&api.Error{Status: 400, Code: api.CodeBadRequest, Message: "m"}, ExitUsage},
		{&api.Error{Status: 500, Code: api.CodeInternal, Message: "m"}, ExitSoftware},
		{&api.Error{Status: 429, Code: api.CodeQuota, Message: "m"}, ExitTempFail},
		{&api.Error{Status: 503, Code: api.CodeUnavailable, Message: "m"}, ExitTempFail},
		{errors.New("other"), ExitSoftware},
	}
	for _, tt := range tests {
		if got, _ := Exit(tt.err); got != tt.code {
			t.Errorf("Exit(%v) = %d, want %d", tt.err, got, tt.code)
		}
	}
	if _, msg := Exit(&api.Error{Status: 403, Message: "a\x1b[41mb"}); strings.Contains(msg, "\x1b") {
		t.Errorf("Exit message %q carries a terminal escape", msg)
	}
}

func TestWaitCode(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		c    api.Claim
		want int
	}{
		{api.Claim{State: store.Exited, ExitCode: code(0)}, WaitClean},
		{api.Claim{State: store.Exited, ExitCode: code(3)}, WaitFailed},
		{api.Claim{State: store.Exited, ExitSignal: 9}, WaitFailed},
		{api.Claim{State: store.Exited, RetiredReason: "exited while not watched; exit code unknown"}, WaitUnknown},
		{api.Claim{State: store.Released, Release: &api.Release{Dead: true}}, WaitClean},
		{api.Claim{State: store.Released, Release: &api.Release{Survivors: []api.Instance{{Pid: 5}}}}, WaitSurvivors},
		{api.Claim{State: store.Retired}, WaitUnknown},
		{api.Claim{State: store.Dropped}, WaitUnknown},
	}
	for _, tt := range tests {
		if got := WaitCode(tt.c); got != tt.want {
			t.Errorf("WaitCode(%s %+v) = %d, want %d", tt.c.State, tt.c, got, tt.want)
		}
	}
}

// stateBackend answers Get with each state in turn, then the last; Verify
// with OWNED until the Get states are used up.
type stateBackend struct {
	api.Backend
	states []store.State
	gets   atomic.Int32
}

func (b *stateBackend) Get(ctx context.Context, p api.Peer, id string) (api.Claim, error) {
	s := b.states[min(int(b.gets.Add(1))-1, len(b.states)-1)]
	return api.Claim{ID: id, State: s}, nil
}

func (b *stateBackend) Verify(ctx context.Context, p api.Peer, r *api.ClaimRequest) (verdict.Verdict, error) {
	if int(b.gets.Add(1)) < len(b.states) {
		return verdict.Verdict{Result: verdict.Owned}, nil
	}
	return verdict.Verdict{Result: verdict.Gone}, nil
}

// TestWait: a wait asks until the claim's state is final, and only then;
// it times out, and an interrupted wait says so.
func TestWait(t *testing.T) {
	b := &stateBackend{states: []store.State{store.Running, store.Releasing, store.Survivors, store.Released}}
	c := serve(t, b)
	cl, err := Wait(context.Background(), c, "g-aaaaaaaaaaaa", 0)
	if err != nil || cl.State != store.Released || b.gets.Load() != 4 {
		t.Errorf("Wait() = %s, %v after %d asks, want released after 4", cl.State, err, b.gets.Load())
	}
	b.gets.Store(0)
	if v, err := WaitProcess(context.Background(), c, 5, token.Token{Start: 1, Prec: token.Ticks}, 0); err != nil || v.Result != verdict.Gone {
		t.Errorf("WaitProcess() = %v, %v, want GONE", v.Result, err)
	}
	b.states = []store.State{store.Running}
	b.gets.Store(0)
	if _, err := Wait(context.Background(), c, "g-aaaaaaaaaaaa", 100*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Errorf("Wait() on a claim that never ends = %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := Wait(ctx, c, "g-aaaaaaaaaaaa", time.Hour); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Wait() cancelled = %v, want ErrInterrupted", err)
	}
}

func TestVerdictAndKillExit(t *testing.T) {
	verdicts := []struct {
		r    verdict.Result
		code int
	}{
		{verdict.Owned, 0}, {verdict.Foreign, 1}, {verdict.Gone, 2}, {verdict.Unverifiable, 3},
	}
	for _, tt := range verdicts {
		if got := VerdictExit(tt.r); got != tt.code {
			t.Errorf("VerdictExit(%v) = %d, want %d", tt.r, got, tt.code)
		}
	}
	kills := []struct {
		name string
		out  actions.Outcome
		code int
	}{
		{"all dead", actions.Outcome{Acted: true, Dead: true}, 0},
		{"forbidden", actions.Outcome{}, 1},
		{"survivors", actions.Outcome{Acted: true}, 2},
		{"unproven members", actions.Outcome{Unproven: []actions.Member{{}}}, 2},
	}
	for _, tt := range kills {
		if got := KillExit(tt.out); got != tt.code {
			t.Errorf("KillExit(%s) = %d, want %d", tt.name, got, tt.code)
		}
	}
}
