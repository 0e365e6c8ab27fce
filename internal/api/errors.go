package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Errors a Backend wraps so that the server answers the right status and
// code (ErrorBody.Code). On the client side an *Error answers errors.Is
// for the sentinel of its code, so a caller tells "the daemon does not
// hold it" from "it is another user's" without reading the message.
var (
	ErrBadRequest  = errors.New("bad request")         // 400
	ErrForbidden   = errors.New("forbidden")           // 403
	ErrNotFound    = errors.New("not found")           // 404
	ErrConflict    = errors.New("conflict")            // 409
	ErrUnavailable = errors.New("service unavailable") // 503
	ErrQuota       = errors.New("over quota")          // 429
	// ErrNotHeld: the daemon holds no claim on the process; only then
	// may a client act on it by itself (404).
	ErrNotHeld = errors.New("not held by the supervisor")
	// ErrNotYours: a claim holds it, for another user (403).
	ErrNotYours = errors.New("held for another user")
	// ErrProtected: the process is the daemon, one of its ancestors or
	// pid 1, never signalled through the API (403).
	ErrProtected = errors.New("protected")
)

// Error codes of ErrorBody.Code.
const (
	CodeBadRequest  = "bad_request"
	CodeForbidden   = "forbidden"
	CodeNotFound    = "not_found"
	CodeConflict    = "conflict"
	CodeUnavailable = "unavailable"
	CodeQuota       = "quota"
	CodeNotHeld     = "not_held"
	CodeNotYours    = "not_yours"
	CodeProtected   = "protected"
	CodeTooLarge    = "too_large"
	CodeInternal    = "internal"
)

// errorKinds maps each sentinel to its status and code; the specific ones
// come first, so that an error wrapping two is answered as the first.
var errorKinds = []struct {
	err    error
	status int
	code   string
}{
	{ErrNotHeld, http.StatusNotFound, CodeNotHeld},
	{ErrNotYours, http.StatusForbidden, CodeNotYours},
	{ErrProtected, http.StatusForbidden, CodeProtected},
	{ErrBadRequest, http.StatusBadRequest, CodeBadRequest},
	{ErrForbidden, http.StatusForbidden, CodeForbidden},
	{ErrNotFound, http.StatusNotFound, CodeNotFound},
	{ErrConflict, http.StatusConflict, CodeConflict},
	{ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable},
	{ErrQuota, http.StatusTooManyRequests, CodeQuota},
}

// kindOf returns the status and code of a backend's error: 500 internal
// for one that wraps no sentinel.
func kindOf(err error) (int, string) {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.status, k.code
		}
	}
	return http.StatusInternalServerError, CodeInternal
}

// codeOfStatus is the code of an answer with status and no code of its
// own (the server's own refusals; a daemon older than codes).
func codeOfStatus(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusTooManyRequests:
		return CodeQuota
	}
	for _, k := range errorKinds[3:] { // the generic ones
		if k.status == status {
			return k.code
		}
	}
	return CodeInternal
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Code says what kind of refusal it is (CodeNotHeld, CodeNotYours ...).
	Code string `json:"code,omitempty"`
}

// Error is an error the daemon answered.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is when the daemon said to ask again (429, 503), 0
	// when it did not.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("daemon: %s (HTTP %d)", e.Message, e.Status) }

// Is reports whether target is the sentinel of e's code (ErrNotHeld for
// CodeNotHeld ...).
func (e *Error) Is(target error) bool {
	for _, k := range errorKinds {
		if k.err == target {
			return k.code == e.Code
		}
	}
	return false
}
