package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// A release or a kill may answer as a stream of progress: a client that
// sends "Accept: application/x-ndjson" gets 200 and one JSON object a line,
// StreamLine: each step of the teardown as it starts ({"progress": "SIGTERM
// to 3"}), an empty object as a heartbeat, and last the result
// ({"result": ...}) or the error ({"error": ..., "code": ..., "status":
// 403}). A request the server refuses before it reaches the backend (a
// malformed body, a rate limit) is answered as usual, not streamed.
//
// The stream is bounded: a teardown says a few steps, and a client too
// slow to read them loses steps, never delays the teardown.

// NDJSON is the media type of a progress stream.
const NDJSON = "application/x-ndjson"

// StreamLine is one line of a progress stream.
type StreamLine struct {
	Progress string          `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Code     string          `json:"code,omitempty"`
	Status   int             `json:"status,omitempty"`
}

type progressKey struct{}

// ProgressOf returns the function a streaming request is told its steps
// by, or nil when the request does not stream. It never blocks.
func ProgressOf(ctx context.Context) func(step string) {
	f, _ := ctx.Value(progressKey{}).(func(string))
	return f
}

// progressSteps bounds the steps waiting to be written to one stream.
const progressSteps = 16

// streamed answers fn's result with status, or, when the client asks for
// a stream, as StreamLines with fn's steps before it.
func (s *Server) streamed(w http.ResponseWriter, r *http.Request, status int, fn func(ctx context.Context) (any, error)) {
	if !strings.Contains(r.Header.Get("Accept"), NDJSON) {
		res, err := fn(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, status, res)
		return
	}
	steps := make(chan string, progressSteps)
	ctx := context.WithValue(r.Context(), progressKey{}, func(step string) {
		select {
		case steps <- step:
		default: // a slow reader loses a step
		}
	})
	type answer struct {
		res any
		err error
	}
	done := make(chan answer, 1)
	go func() { // ends with fn, which ends with the request's context
		res, err := fn(ctx)
		done <- answer{res, err}
	}()
	w.Header().Set("Content-Type", NDJSON)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	line := func(l StreamLine) {
		_ = enc.Encode(l)
		_ = rc.Flush()
	}
	beat := time.NewTicker(max(time.Duration(s.lim.IdleTimeout)/2, time.Second))
	defer beat.Stop()
	for {
		select {
		case st := <-steps:
			line(StreamLine{Progress: Trunc(st, MaxString)})
		case <-beat.C:
			line(StreamLine{})
		case a := <-done:
			for len(steps) > 0 {
				line(StreamLine{Progress: Trunc(<-steps, MaxString)})
			}
			if a.err != nil {
				st, code := kindOf(a.err)
				line(StreamLine{Error: a.err.Error(), Code: code, Status: st})
				return
			}
			b, err := json.Marshal(a.res)
			if err != nil {
				line(StreamLine{Error: "encoding the result: " + err.Error(), Code: CodeInternal, Status: http.StatusInternalServerError})
				return
			}
			line(StreamLine{Result: b})
			return
		}
	}
}

// readStream reads a progress stream: each step to progress, the result
// into out. Errors: *Error for an error line.
func readStream(body io.Reader, what string, out any, progress func(string)) error {
	dec := json.NewDecoder(io.LimitReader(body, 64<<20))
	for {
		var l StreamLine
		if err := dec.Decode(&l); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: the stream ended without a result: %w", what, err)
		}
		switch {
		case l.Progress != "":
			progress(l.Progress)
		case l.Status != 0 || l.Error != "":
			if l.Code == "" {
				l.Code = codeOfStatus(l.Status)
			}
			return &Error{Status: l.Status, Code: l.Code, Message: Trunc(l.Error, MaxString)}
		case l.Result != nil:
			if err := json.Unmarshal(l.Result, out); err != nil {
				return fmt.Errorf("%s: decoding the result: %w", what, err)
			}
			return nil
		}
	}
}
