package main

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// wireBackend answers launch, list and release with one stored claim,
// converted as the daemon converts it.
type wireBackend struct{ api.Backend }

func wireClaim() store.Claim {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return store.Claim{
		ID: "g-abcdefghijkl", Kind: store.Grant, Owner: "build-42", Argv: []string{"sleep", "600"},
		Pid: 4242, Token: token.Token{Start: 1, Prec: token.Ticks}, State: store.Running,
		CreatedAt: at, UpdatedAt: at, WallClock: time.Hour, Deadline: at.Add(time.Hour), Rev: 3,
		LastVerdict: &store.Verdict{Result: verdict.Owned, Reason: "pidfs inode matches", Mechanism: "pidfd", At: at},
	}
}

func (wireBackend) Launch(context.Context, api.Peer, *api.LaunchRequest) (api.Claim, error) {
	return api.ClaimOf(wireClaim()), nil
}

func (wireBackend) List(context.Context, api.Peer, api.ListQuery) ([]api.Claim, string, error) {
	return []api.Claim{api.ClaimOf(wireClaim())}, "", nil
}

func (wireBackend) Release(_ context.Context, _ api.Peer, id string, _ *api.ReleaseRequest) (api.ReleaseResponse, error) {
	c := wireClaim()
	c.State = store.Released
	v := verdict.Verdict{Result: verdict.Owned, Reason: "pidfs inode matches"}
	return api.ReleaseResponse{Claim: api.ClaimOf(c), Outcome: &actions.Outcome{Verdict: v, Acted: true, Dead: true}}, nil
}

// TestCLIPrintsWireClaims runs launch, list and release against an API
// server with a fake backend: the CLI prints the wire claim, with
// wall_clock as duration text (it printed nanoseconds when the API's claim
// embedded the store's record) and without the store's write counter.
func TestCLIPrintsWireClaims(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(wireBackend{}, nil)
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	code, out, errs := cli(t, "launch", "--json", "--socket", sock, "--wall-clock", "1h", "--", "sleep", "600")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"wall_clock":"1h0m0s"`) || strings.Contains(out, `"rev"`) ||
		!strings.Contains(out, `"last_verdict":{`) || !strings.Contains(out, `"verdict":"OWNED"`) {
		t.Errorf("launch --json = %d %q %q, want the claim on one line with wall_clock 1h0m0s and no rev", code, out, errs)
	}
	code, out, errs = cli(t, "launch", "--socket", sock, "sleep", "600")
	if want := "g-abcdefghijkl 4242 v1:t:00000000000000000000000000000000:1:-\n"; code != 0 || out != want {
		t.Errorf("launch = %d %q %q, want %q", code, out, errs, want)
	}
	code, out, errs = cli(t, "list", "--socket", sock)
	want := regexp.MustCompile(`^ID +KIND +STATE +AGE +PID +VERDICT +USER +OWNER +RESULT +COMMAND\n` +
		`g-abcdefghijkl +grant +running +\d+d +4242 +OWNED +root +build-42 +wall clock due +sleep 600\n$`)
	if code != 0 || !want.MatchString(out) {
		t.Errorf("list = %d %q %q, want\n%s", code, out, errs, want)
	}
	code, out, errs = cli(t, "release", "--socket", sock, "g-abcdefghijkl")
	wantRel := "g-abcdefghijkl released (OWNED: pidfs inode matches; 0 targeted, 0 survivors, 0 unproven)\n"
	if code != 0 || out != wantRel {
		t.Errorf("release = %d %q %q, want %q", code, out, errs, wantRel)
	}
}
