package api

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func TestDurationFlagValue(t *testing.T) {
	var d Duration
	var _ flag.Value = &d
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&d, "grace", "")
	if err := fs.Parse([]string{"--grace", "90s"}); err != nil || time.Duration(d) != 90*time.Second {
		t.Errorf("--grace 90s: %v, %v; want 1m30s", d, err)
	}
	if err := fs.Parse([]string{"--grace", "-1s"}); err == nil {
		t.Errorf("--grace -1s accepted: %v", d)
	}
	if got, want := Duration(time.Hour).String(), "1h0m0s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// storeClaim is a stored claim with every field set.
func storeClaim() store.Claim {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	code := 3
	return store.Claim{
		ID: "g-abcdefghijkl", Kind: store.Grant, Owner: "o", UID: 1000, GID: 100,
		Argv: []string{"sleep", "1"}, Cwd: "/", Pid: 42, Token: token.Token{Start: 116, Prec: token.Ticks}, Pgid: 42,
		Cgroup: "/sys/fs/cgroup/x", CreatedAt: now, State: store.Released,
		LastVerdict: &store.Verdict{Result: verdict.Owned, Reason: "r", Mechanism: "pidfd", At: now},
		Release:     &store.Release{Dead: true, Escalated: true, Survivors: []store.Instance{{Pid: 7, Token: token.Token{Start: 115, Prec: token.Ticks}}}, Unproven: []store.Instance{{Pid: 1, Token: token.Token{Start: 117, Prec: token.Ticks}, Reason: "protected"}}, Ownership: verdict.Owned, At: now, Cause: "holder gone"},
		Members:     []store.Member{{Pid: 43, Token: token.Token{Start: 109, Prec: token.Ticks}, Parent: 42, ParentToken: token.Token{Start: 116, Prec: token.Ticks}, BornAt: now}},
		Holder:      &store.Instance{Pid: 1, Token: token.Token{Start: 104, Prec: token.Ticks}},
		WallClock:   time.Hour, Deadline: now.Add(time.Hour),
		ExitCode: &code, ExitSignal: 9, EndedAt: now, OutputPath: "/o", RetiredReason: "why", FollowedUp: true,
		Rev: 7, UpdatedAt: now,
	}
}

// jsonKeys returns v's JSON object with every key path in it ("release",
// "release.survivors.pid"...) set in paths.
func jsonKeys(t *testing.T, v any, paths map[string]bool) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				paths[prefix+k] = true
				walk(prefix+k+".", e)
			}
		case []any:
			for _, e := range v {
				walk(prefix, e)
			}
		}
	}
	walk("", m)
	return m
}

// TestClaimWire pins the wire form of a claim: wall_clock is duration text
// both ways (it went out as nanoseconds when api.Claim embedded the store's
// record), the keys are the ones clients saw before except the store's
// write counter, and a store field that is not on the wire is a decision
// this test makes someone take.
func TestClaimWire(t *testing.T) {
	c := storeClaim()
	w := ClaimOf(c)
	gotKeys, oldKeys := map[string]bool{}, map[string]bool{}
	got := jsonKeys(t, w, gotKeys)
	if got["wall_clock"] != "1h0m0s" {
		t.Errorf("wall_clock on the wire = %v, want \"1h0m0s\"", got["wall_clock"])
	}
	// The store's record is what api.Claim used to embed, with members
	// beside it; rev is the store's write counter.
	jsonKeys(t, c, oldKeys)
	jsonKeys(t, map[string][]store.Member{"members": c.Members}, oldKeys)
	delete(oldKeys, "rev")
	if gk, wk := slices.Sorted(maps.Keys(gotKeys)), slices.Sorted(maps.Keys(oldKeys)); !slices.Equal(gk, wk) {
		t.Errorf("wire keys\n%v\nwant\n%v", gk, wk)
	}
	b, _ := json.Marshal(w)
	var back Claim
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the client cannot decode what the server sends: %v", err)
	}
	if time.Duration(back.WallClock) != time.Hour || len(back.Members) != 1 || back.Members[0].Pid != 43 || *back.ExitCode != 3 {
		t.Errorf("round trip gave %+v", back)
	}
	// ClaimOf shares nothing with the stored claim.
	w.Argv[0], w.Holder.Pid, *w.ExitCode = "x", 99, 99
	if c.Argv[0] != "sleep" || c.Holder.Pid != 1 || *c.ExitCode != 3 {
		t.Errorf("ClaimOf shares memory with the store's claim: %+v", c)
	}
}

// TestClaimArgsRedacted: a claim's wire form says its arguments were
// redacted exactly when one of them is a marker the daemon's patterns
// left (the store keeps no flag of its own).
func TestClaimArgsRedacted(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{nil, false},
		{[]string{"sleep", "600"}, false},
		{[]string{"db", "--password=[REDACTED]"}, true},
		{[]string{"gh", "[REDACTED]"}, true},
		{[]string{"echo", "[REDACTED]x", "x[REDACTED]"}, false},
	}
	for _, tt := range tests {
		w := ClaimOf(store.Claim{Kind: store.Grant, Argv: tt.argv})
		b, _ := json.Marshal(w)
		if w.ArgsRedacted != tt.want || strings.Contains(string(b), `"args_redacted":true`) != tt.want {
			t.Errorf("ClaimOf(argv %q): args_redacted %v, wire %s; want %v", tt.argv, w.ArgsRedacted, b, tt.want)
		}
	}
}

func TestTrunc(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456..."},
		{"ééééé", 8, "éé..."}, // 10 bytes: the cut falls inside a rune
		{"ab\xff\xfecdefgh", 8, "ab?c..."},
		{"\xff\xff\xff\xff\xff\xff", 5, "?..."}, // an invalid run is one "?"
		{"abcdef", 3, "..."},
		{"abcdef", 2, ".."},
		{"abcdef", 0, ""},
		{"abcdef", -1, ""},
	}
	for _, tt := range tests {
		got := Trunc(tt.s, tt.n)
		if got != tt.want {
			t.Errorf("Trunc(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
		if len(got) > max(tt.n, 0) {
			t.Errorf("Trunc(%q, %d) = %q, over %d bytes", tt.s, tt.n, got, tt.n)
		}
		if got != tt.s && utf8.ValidString(tt.s) && !utf8.ValidString(got) {
			t.Errorf("Trunc(%q, %d) = %q, not valid UTF-8", tt.s, tt.n, got)
		}
	}
}

// TestValidID: the API checks claim ids by the store's rule; its own
// looser check let ids the store can never hold reach the backend.
func TestValidID(t *testing.T) {
	for _, id := range []string{store.NewID(store.Grant), store.NewID(store.Job)} {
		if err := validID(id); err != nil {
			t.Errorf("validID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"g-ABCDEFGHIJKL", "g-000000000000", "j-abc/efghijkl", "x-abcdefghijkl", "g-abcdefghijk", ""} {
		if err := validID(id); !errors.Is(err, ErrBadRequest) {
			t.Errorf("validID(%q) = %v, want ErrBadRequest", id, err)
		}
	}
}

// post sends body as it is to the server on sock and returns the status.
func post(t *testing.T, sock, path, body string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://supervisor"+Version+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServerRefuses: requests the server must answer 400 before any
// backend sees them (the fake backend panics on what it does not have,
// which would answer 500).
func TestServerRefuses(t *testing.T) {
	sock := serve(t, fakeBackend{}, nil)
	tok := "v1:t:00000000000000000000000000000000:1:-"
	tests := []struct {
		name, path, body string
	}{
		{"grace over MaxGrace on kill", "/kill", `{"pid":7,"token":"` + tok + `","grace":"2h"}`},
		{"grace over MaxGrace on release", "/claims/g-abcdefghijkl/release", `{"grace":"2h"}`},
		{"trailing bracket", "/verify", `{"pid":7,"token":"` + tok + `"} ]`},
		{"id the store refuses", "/claims/g-ABCDEFGHIJKL/release", `{}`},
		{"negative duration", "/launch", `{"argv":["true"],"wall_clock":"-1s"}`},
	}
	for _, tt := range tests {
		if got := post(t, sock, tt.path, tt.body); got != http.StatusBadRequest {
			t.Errorf("%s: POST %s %s = %d, want 400", tt.name, tt.path, tt.body, got)
		}
	}
	if got := post(t, sock, "/verify", `{"pid":7,"token":"`+tok+`"}`); got != http.StatusOK {
		t.Errorf("POST /verify = %d, want 200", got)
	}
	c := NewClient(sock)
	defer c.Close()
	grace := 2 * time.Hour
	var ae *Error
	if _, err := c.Kill(context.Background(), 7, token.Token{Start: 1, Prec: token.Ticks}, &grace); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("Kill(grace 2h) = %v, want HTTP 400", err)
	}
}

// TestPanicLogged: with the log feed's Internal as the hook, a panic in a
// handler writes one internal_error line with the panic and the stack.
func TestPanicLogged(t *testing.T) {
	var out strings.Builder
	l, err := logfeed.New(logfeed.Config{Writer: &out})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, fakeBackend{}, l.Internal)
	tok := "v1:t:00000000000000000000000000000000:1:-"
	if got := post(t, sock, "/verify", `{"pid":42,"token":"`+tok+`"}`); got != http.StatusInternalServerError {
		t.Fatalf("POST /verify that panics = %d, want 500", got)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log feed wrote %d lines, want 1:\n%s", len(lines), out.String())
	}
	var line struct {
		Event struct{ Action string }
		Error struct {
			Message    string
			StackTrace string `json:"stack_trace"`
		}
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Event.Action != logfeed.ActionInternalError || !strings.Contains(line.Error.Message, "boom") ||
		!strings.Contains(line.Error.StackTrace, "fakeBackend.Verify") {
		t.Errorf("panic logged as %s, want internal_error with the panic and its stack", lines[0])
	}
}
