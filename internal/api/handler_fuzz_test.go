package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// strictBackend answers every call with nothing, after checking that what
// the server handed it passed the server's checks: a request the server
// should have refused and let through is a failure (bad), whatever the
// daemon behind would have made of it.
type strictBackend struct {
	bad func(format string, args ...any)
}

func (b strictBackend) instance(what string, pid int32, tok token.Token, grace *Duration) {
	if pidfd.CheckPid(int64(pid)) != nil || tok.IsZero() {
		b.bad("%s reached the backend with pid %d, token %v", what, pid, tok)
	}
	b.grace(what, grace)
}

func (b strictBackend) grace(what string, g *Duration) {
	if g != nil && (*g < 0 || time.Duration(*g) > MaxGrace) {
		b.bad("%s reached the backend with grace %v", what, time.Duration(*g))
	}
}

func (b strictBackend) id(what, id string) {
	if validID(id) != nil {
		b.bad("%s reached the backend with claim id %q", what, id)
	}
}

func (b strictBackend) Launch(_ context.Context, _ Peer, r *LaunchRequest) (Claim, error) {
	if err := r.Validate(); err != nil {
		b.bad("launch reached the backend invalid: %v", err)
	}
	return Claim{}, nil
}

func (b strictBackend) Admit(_ context.Context, _ Peer, r *AdmitRequest) (Claim, error) {
	b.instance("admit", r.Pid, r.Token, nil)
	if checkString("owner", r.Owner, MaxOwner) != nil {
		b.bad("admit reached the backend with owner %q", r.Owner)
	}
	return Claim{}, nil
}

func (b strictBackend) Release(_ context.Context, _ Peer, id string, r *ReleaseRequest) (ReleaseResponse, error) {
	b.id("release", id)
	b.grace("release", r.Grace)
	return ReleaseResponse{}, nil
}

func (b strictBackend) List(_ context.Context, _ Peer, q ListQuery) ([]Claim, string, error) {
	if q.Limit < 1 || q.Limit > MaxListLimit || len(q.Owner) > MaxOwner || len(q.State) > 32 ||
		q.After != "" && validID(q.After) != nil {
		b.bad("list reached the backend with %+v", q)
	}
	return nil, "", nil
}

func (b strictBackend) Get(_ context.Context, _ Peer, id string) (Claim, error) {
	b.id("get", id)
	return Claim{}, nil
}

func (b strictBackend) Reap(_ context.Context, _ Peer, r *ReapRequest) (Report, error) {
	if r == nil {
		b.bad("reap reached the backend without a request")
	}
	return Report{}, nil
}

func (b strictBackend) Status(context.Context, Peer) (Status, error) { return Status{}, nil }

func (b strictBackend) Verify(_ context.Context, _ Peer, r *ClaimRequest) (verdict.Verdict, error) {
	b.instance("verify", r.Pid, r.Token, r.Grace)
	return verdict.Verdict{}, nil
}

func (b strictBackend) Kill(_ context.Context, _ Peer, r *ClaimRequest) (actions.Outcome, error) {
	b.instance("kill", r.Pid, r.Token, r.Grace)
	return actions.Outcome{}, nil
}

func (b strictBackend) Tree(_ context.Context, _ Peer, pid int32, _ token.Token) ([]TreeNode, int, error) {
	if pidfd.CheckPid(int64(pid)) != nil {
		b.bad("tree reached the backend with pid %d", pid)
	}
	return nil, 0, nil
}

func (b strictBackend) Output(_ context.Context, _ Peer, id string, offset, length int64) (Output, error) {
	b.id("output", id)
	if offset < 0 || length < 0 || length > MaxOutputRead {
		b.bad("output reached the backend with offset %d, length %d", offset, length)
	}
	return Output{}, nil
}

func (b strictBackend) Subscribe(_ context.Context, _ Peer, k StreamKinds) (Stream, error) {
	if k != 0 && k&^(StreamFork|StreamExec|StreamExit|StreamClaim|streamLostOnly) != 0 {
		b.bad("subscribe reached the backend with kinds %#x", uint8(k))
	}
	return endedStream{}, nil
}

type endedStream struct{}

func (endedStream) Next(context.Context) ([]byte, error) { return nil, io.EOF }
func (endedStream) Close()                               {}

var fuzzRoutes = []string{
	"POST /launch", "POST /admit", "POST /claims/%s/release", "GET /claims",
	"GET /claims/%s", "GET /claims/%s/output", "POST /reap", "GET /status",
	"POST /verify", "POST /kill", "GET /tree", "GET /events",
}

// FuzzHandler sends the server's handler any route, claim id, query and
// body, as root and as another user: the handler never panics, answers
// with a status it means (nothing past 599, no 500 from bad input), puts a
// JSON body on what it answers as JSON, and lets through to the backend
// only requests that pass its checks.
func FuzzHandler(f *testing.F) {
	tok := "v1:t:00000000000000000000000000000001:1:-"
	f.Add(uint8(0), "", "", []byte(`{"argv":["sleep","1"]}`), false)
	f.Add(uint8(1), "", "", []byte(`{"pid":42,"token":"`+tok+`","owner":"ci"}`), false)
	f.Add(uint8(2), "g-00000000000000000000000000", "", []byte(`{"grace":"-1s"}`), false)
	f.Add(uint8(3), "", "limit=0&uid=x&after=zz", []byte(nil), true)
	f.Add(uint8(5), "j-0", "offset=-1&length=99999999999", []byte(nil), false)
	f.Add(uint8(8), "", "", []byte(`{"pid":-1,"token":"`+tok+`"}`), false)
	f.Add(uint8(9), "", "", []byte(`{"pid":2147483647,"token":"`+tok+`","grace":"2h"}`), true)
	f.Add(uint8(10), "", "pid=0&token=v1:x", []byte(nil), false)
	f.Add(uint8(11), "", "kind=fork,,lost,exec", []byte(nil), false)
	f.Fuzz(func(t *testing.T, route uint8, id, query string, body []byte, root bool) {
		var failed []string
		b := strictBackend{bad: func(format string, args ...any) { failed = append(failed, fmt.Sprintf(format, args...)) }}
		var panicked string
		s := NewServer(b, func(msg string, _ []byte) { panicked = msg }, WithLimits(Limits{Rate: 1e9, Burst: 1 << 30}))
		method, path, _ := strings.Cut(fuzzRoutes[int(route)%len(fuzzRoutes)], " ")
		if strings.Contains(path, "%s") {
			path = fmt.Sprintf(path, id)
		}
		req, err := http.NewRequest(method, "http://supervisor"+Version+path, bytes.NewReader(body))
		if err != nil {
			return // no such request reaches a server
		}
		req.URL.RawQuery = query
		p := Peer{Pid: 4242, UID: 1000, GID: 1000}
		if root {
			p = Peer{Pid: 4242}
		}
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, p))
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if panicked != "" {
			t.Fatalf("%s %s?%s: the handler panicked: %s", method, path, query, panicked)
		}
		for _, f := range failed {
			t.Errorf("%s %s?%s body %q: %s", method, path, query, body, f)
		}
		if w.Code < 200 || w.Code > 599 || w.Code == http.StatusInternalServerError {
			t.Fatalf("%s %s?%s body %q: status %d", method, path, query, body, w.Code)
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			// A streamed answer is JSON lines; each must parse.
			for line := range bytes.Lines(w.Body.Bytes()) {
				if !json.Valid(line) {
					t.Fatalf("%s %s: status %d, a line that is not JSON: %q", method, path, w.Code, line)
				}
			}
		}
	})
}
