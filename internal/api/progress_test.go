package api

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// stepBackend's Kill says its steps through ProgressOf, then answers err,
// or an outcome when err is nil.
type stepBackend struct {
	Backend
	steps []string
	err   error
}

func (b stepBackend) Kill(ctx context.Context, p Peer, r *ClaimRequest) (actions.Outcome, error) {
	if f := ProgressOf(ctx); f != nil {
		for _, s := range b.steps {
			f(s)
		}
	}
	return actions.Outcome{Verdict: verdict.Verdict{Pid: r.Pid, Result: verdict.Owned}, Dead: true, Mechanism: "fake"}, b.err
}

// TestProgressStream: a client that asks for progress gets each step and
// then the result, or the error with its code; one that does not gets the
// plain answer and the backend sees no progress function.
func TestProgressStream(t *testing.T) {
	tok := token.Token{Start: 1, Prec: token.Ticks}
	steps := []string{"SIGTERM to 3", "waiting up to 8s", "SIGKILL to 1"}
	c := NewClient(serve(t, stepBackend{steps: steps}, nil))
	defer c.Close()
	var got []string
	out, err := c.KillWatch(context.Background(), 7, tok, nil, func(s string) { got = append(got, s) })
	if err != nil || !out.Dead || !slices.Equal(got, steps) {
		t.Errorf("KillWatch() = %+v, %v, steps %q; want dead and %q", out, err, got, steps)
	}
	if out, err := c.Kill(context.Background(), 7, tok, nil); err != nil || !out.Dead {
		t.Errorf("Kill() without progress = %+v, %v", out, err)
	}

	c2 := NewClient(serve(t, stepBackend{steps: steps[:1], err: ErrNotYours}, nil))
	defer c2.Close()
	got = nil
	_, err = c2.KillWatch(context.Background(), 7, tok, nil, func(s string) { got = append(got, s) })
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != 403 || !errors.Is(err, ErrNotYours) || len(got) != 1 {
		t.Errorf("KillWatch() refused = %v, steps %q; want 403 not_yours after one step", err, got)
	}
}

// FuzzReadStream: whatever a socket streams back, readStream ends with a
// result, an *Error or an error, and tells progress only the steps.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("{\"progress\":\"SIGTERM to 3\"}\n{}\n{\"result\":{\"dead\":true}}\n"))
	f.Add([]byte("{\"progress\":\"x\"}\n{\"error\":\"no\",\"code\":\"not_yours\",\"status\":403}\n"))
	f.Add([]byte("{\"progress\":\"x\"}\n"))
	f.Add([]byte("{\"result\":[1,2]}"))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out struct {
			Dead bool `json:"dead"`
		}
		n := 0
		err := readStream(bytes.NewReader(b), "POST /kill", &out, func(s string) {
			if s == "" {
				t.Fatal("an empty step was told")
			}
			n++
		})
		var ae *Error
		if errors.As(err, &ae) && ae.Code == "" {
			t.Fatalf("an error line without a code: %+v", ae)
		}
		if n > bytes.Count(b, []byte("{")) {
			t.Fatalf("%d steps told from %q", n, b)
		}
	})
}
