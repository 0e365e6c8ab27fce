package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Peer is the process at the other end of a connection, from SO_PEERCRED.
type Peer struct {
	Pid      int32
	UID, GID uint32
	// ShareUID, when not 0, is the uid whose share of the daemon the peer
	// draws on instead of UID's (userns.Account: the user who made the
	// user namespace it runs in, with the uids /etc/subuid gave it).
	ShareUID uint32
	// PidNS is the inode of the peer's pid namespace (0 when unread).
	PidNS uint64
	// OtherPidNS is set when the peer runs in a pid namespace other than
	// the daemon's, or where that could not be read and confirmed: the
	// pids it names are not the daemon's, and it cannot signal what the
	// daemon sees outside its namespace. Such a peer is answered status
	// alone.
	OtherPidNS bool
	// Short is set when the peer's pidfd could not be had for a want of
	// descriptors or memory in the daemon (EMFILE, ENFILE, ENOMEM), so
	// that its pid namespace was not confirmed: such a peer is told to
	// retry (503), not refused as one from another namespace.
	Short bool
}

// Root reports whether the peer is root.
func (p Peer) Root() bool { return p.UID == 0 }

// Share is the uid whose share of the daemon the peer draws on: its
// connections, request rate, long-lived requests, quotas and descriptors.
// What it may act on is UID's.
func (p Peer) Share() uint32 {
	if p.ShareUID != 0 {
		return p.ShareUID
	}
	return p.UID
}

// Backend is the daemon as the server uses it. Every method gets the peer
// and must authorise the request itself.
type Backend interface {
	Launch(ctx context.Context, p Peer, r *LaunchRequest) (Claim, error)
	Admit(ctx context.Context, p Peer, r *AdmitRequest) (Claim, error)
	Release(ctx context.Context, p Peer, id string, r *ReleaseRequest) (ReleaseResponse, error)
	// List returns a page of claims and the cursor of the next page ("" on
	// the last).
	List(ctx context.Context, p Peer, q ListQuery) ([]Claim, string, error)
	Get(ctx context.Context, p Peer, id string) (Claim, error)
	Reap(ctx context.Context, p Peer, r *ReapRequest) (Report, error)
	Status(ctx context.Context, p Peer) (Status, error)
	Verify(ctx context.Context, p Peer, r *ClaimRequest) (verdict.Verdict, error)
	Kill(ctx context.Context, p Peer, r *ClaimRequest) (actions.Outcome, error)
	// Tree answers at most MaxTreeNodes nodes, and how many it walked
	// (what the answer cost, whatever it shows the caller).
	Tree(ctx context.Context, p Peer, pid int32, tok token.Token) (nodes []TreeNode, walked int, err error)
	// Output reads at most length bytes (length is 0 to MaxOutputRead: 0
	// asks the size alone) of the output of claim id from offset (not
	// negative).
	Output(ctx context.Context, p Peer, id string, offset, length int64) (Output, error)
}

type (
	peerKey struct{}
	connKey struct{}
)

// PeerOf returns the peer stored in ctx by the server's ConnContext hook.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// Server serves the API for a Backend.
type Server struct {
	b       Backend
	srv     *http.Server
	lim     Limits
	onPanic func(msg string, stack []byte)
	// refuseConfinable: a peer confinable (peer_linux.go) at its request
	// is answered status alone.
	refuseConfinable bool

	mu   sync.Mutex
	reqs map[uint32]*reqUser // request accounting of non-root uids
}

// reqUser is one uid's token bucket and long-lived requests in flight, of
// each class.
type reqUser struct {
	tokens float64
	at     time.Time
	long   [2]int
}

// longClass sorts long-lived requests: a uid's event streams do not take
// the room of its releases and kills (four `supervisor events` left
// running made every release of the user's own claims a 429).
type longClass int

const (
	longAction longClass = iota // a release or a kill waiting out a grace
	longStream                  // an event stream
)

var longNames = [...]string{longAction: "releases and kills", longStream: "event streams"}

// An Option configures a Server.
type Option func(*Server)

// WithLimits sets the server's fairness limits; a zero field keeps its
// default (DefaultLimits).
func WithLimits(l Limits) Option { return func(s *Server) { s.lim = l.withDefaults() } }

// WithRefuseConfinable makes the server answer status alone (403 for every
// other request) to a peer but root that, when its request comes, may be
// confined in ways the daemon can neither see nor carry to what it does
// for it: any of its threads has no_new_privs (which a Landlock domain
// needs), or it runs in a user namespace other than the daemon's (where
// it needs none), or its main thread has exited, or this could not be
// read and confirmed. A sandbox that confines its processes with Landlock
// would otherwise have root act for them past it. Not seen: an LSM label
// (a caller confined by AppArmor or SELinux without no_new_privs), and a
// connection a confined process inherited or was handed.
func WithRefuseConfinable() Option { return func(s *Server) { s.refuseConfinable = true } }

// NewServer returns a Server for b. A handler that panics answers 500 and
// the server goes on; onPanic, unless nil, is then called with what
// panicked (the request's method and path and the panic value, bounded)
// and the goroutine's stack, so that the daemon can log it.
func NewServer(b Backend, onPanic func(msg string, stack []byte), opts ...Option) *Server {
	s := &Server{b: b, lim: DefaultLimits, onPanic: onPanic, reqs: map[uint32]*reqUser{}}
	for _, o := range opts {
		o(s)
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      time.Duration(s.lim.RequestTimeout),
		IdleTimeout:       time.Duration(s.lim.IdleTimeout),
		MaxHeaderBytes:    16 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if gc, ok := c.(*gateConn); ok {
				ctx = context.WithValue(ctx, connKey{}, gc)
				if gc.hasPeer {
					ctx = context.WithValue(ctx, peerKey{}, gc.peer)
				}
				return ctx
			}
			if p, err := peerOf(c); err == nil {
				return context.WithValue(ctx, peerKey{}, p)
			}
			return ctx
		},
		// Keep-alive connections between requests may be reclaimed
		// for a uid waiting on the shared cap (gate.reclaimLocked).
		ConnState: func(c net.Conn, st http.ConnState) {
			if gc, ok := c.(*gateConn); ok && gc.key != 0 {
				gc.g.connState(gc, st == http.StateIdle)
			}
		},
		ErrorLog: nil,
	}
	return s
}

// Serve accepts connections on l, and on the listeners more (the private
// socket, PrivateSocket), until Shutdown, each one at once: the server's
// gate (fair.go) then serves it, lets it wait for a slot of its uid, or
// refuses it. It returns http.ErrServerClosed after a Shutdown.
func (s *Server) Serve(l net.Listener, more ...net.Listener) error {
	g := newGate(l, s.lim, more...)
	go g.loop() // ends when the listener closes: Shutdown, or Serve's end
	return s.srv.Serve(g)
}

// Shutdown stops accepting and waits for requests in flight, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Handler returns the API's handler: the request rate and long-lived
// requests are capped here, connections by Serve.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Version+"/launch", call(http.StatusCreated, s.b.Launch))
	mux.HandleFunc("POST "+Version+"/admit", call(http.StatusCreated, s.b.Admit))
	mux.HandleFunc("POST "+Version+"/claims/{id}/release", s.longLived(longAction, s.release))
	mux.HandleFunc("GET "+Version+"/claims", s.list)
	mux.HandleFunc("GET "+Version+"/claims/{id}", s.get)
	mux.HandleFunc("GET "+Version+"/claims/{id}/output", s.output)
	mux.HandleFunc("POST "+Version+"/reap", s.reap)
	mux.HandleFunc("GET "+Version+"/status", s.status)
	mux.HandleFunc("POST "+Version+"/verify", call(http.StatusOK, s.b.Verify))
	mux.HandleFunc("POST "+Version+"/kill", s.longLived(longAction, streamCall(s, http.StatusOK, s.b.Kill)))
	mux.HandleFunc("GET "+Version+"/tree", s.tree)
	mux.HandleFunc("GET "+Version+"/events", s.longLived(longStream, s.events))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+Trunc(r.URL.Path, 200))
	})
	return mark(s.recoverer(s.admit(mux)))
}

// mark sends APIHeader on every answer, before anything else can answer.
func mark(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(APIHeader, Version[1:])
		h.ServeHTTP(w, r)
	})
}

// admit answers a request on a connection the gate refused (503), one
// without peer credentials (403), and one over its uid's rate (429), and
// passes the others to h.
func (s *Server) admit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gc, ok := r.Context().Value(connKey{}).(*gateConn); ok && gc.refuse != "" {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, gc.refuse)
			return
		}
		p, ok := PeerOf(r.Context())
		if !ok {
			writeError(w, http.StatusForbidden, "peer credentials unavailable")
			return
		}
		if p.OtherPidNS && r.URL.Path != Version+"/status" {
			if p.Short {
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the daemon is short of descriptors or memory and could not confirm pid %d's pid namespace; retry", p.Pid))
				return
			}
			writeError(w, http.StatusForbidden, otherPidNS(p))
			return
		}
		if s.refuseConfinable && !p.Root() && r.URL.Path != Version+"/status" && confinable(r.Context(), p) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("pid %d (uid %d) has no_new_privs or a user namespace of its own, so it may be confined "+
				"(Landlock) in ways the daemon cannot carry to what it does for it; this daemon refuses such callers (sandboxed_callers: refuse)", p.Pid, p.UID))
			return
		}
		if wait, ok := s.take(p, time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("rate limit: uid %d is over %g requests a second (%d at once); retry in %v",
				p.Share(), s.lim.Rate, s.lim.Burst, wait.Round(time.Millisecond)))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// otherPidNS is the refusal of a request from a peer in another pid
// namespace.
func otherPidNS(p Peer) string {
	if p.PidNS == 0 {
		return fmt.Sprintf("the caller's pid namespace could not be read (has pid %d exited?): the daemon acts only for callers in its own pid namespace (status alone is answered here)", p.Pid)
	}
	return fmt.Sprintf("the caller runs in pid:[%d], not in the daemon's pid namespace (pid:[%d]): the pids it names and would be shown are not its own, "+
		"and the daemon acts only for callers that see what it sees; call from the daemon's pid namespace (status alone is answered here)", p.PidNS, ownPidNS())
}

// maxPanicText bounds the panic message handed to onPanic and the client.
const maxPanicText = 1024

func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				if s.onPanic != nil {
					msg := fmt.Sprintf("panic serving %s %s: %v", r.Method, Trunc(r.URL.Path, 200), v)
					s.onPanic(Trunc(msg, maxPanicText), debug.Stack())
				}
				writeError(w, http.StatusInternalServerError, Trunc(fmt.Sprintf("internal error: %v", v), maxPanicText))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// cutMarker ends a string that Trunc cut.
const cutMarker = "..."

// Trunc bounds s to n bytes for a log line, an error message or a stored
// reason. s comes back as it is when it fits. Otherwise Trunc keeps the
// longest prefix that ends on a rune boundary and leaves room for the
// marker "...", replaces any invalid UTF-8 in that prefix with "?", and
// appends the marker: a cut string is always marked, never splits a rune,
// and is at most n bytes (for n under 3, the marker itself is cut).
func Trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len(cutMarker) {
		return cutMarker[:max(n, 0)]
	}
	// Back off to the start of the rune the cut falls in; a run of
	// continuation bytes longer than a rune is invalid anyway.
	cut := n - len(cutMarker)
	for i := 1; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	// An invalid run becomes one "?": never longer than it was.
	return strings.ToValidUTF8(s[:cut], "?") + cutMarker
}

// writeJSON answers v as JSON, without HTML escaping: '<', '>' and '&'
// travel as themselves, not six bytes each (no answer is HTML).
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg, Code: codeOfStatus(status)})
}

func writeErr(w http.ResponseWriter, err error) {
	status, code := kindOf(err)
	writeJSON(w, status, ErrorBody{Error: err.Error(), Code: code})
}

// decode reads a bounded body into v. An empty body leaves v as it is when
// emptyOK.
func decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			return true
		}
		writeError(w, http.StatusBadRequest, "empty body, want a JSON object")
		return false
	}
	if err := jsonx.DecodeUnique(body, MaxBodyBytes, v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+Trunc(err.Error(), 300))
		return false
	}
	return true
}

func peer(r *http.Request) Peer { p, _ := PeerOf(r.Context()); return p }

// validated is a request body that checks its own fields.
type validated[T any] interface {
	*T
	Validate() error
}

// body decodes r's body strictly into a new request and validates it, or
// answers why not.
func body[Req any, P validated[Req]](w http.ResponseWriter, r *http.Request) (P, bool) {
	req := P(new(Req))
	if !decode(w, r, req, false) {
		return nil, false
	}
	if err := req.Validate(); err != nil {
		writeErr(w, err)
		return nil, false
	}
	return req, true
}

// call is the handler of an endpoint whose body is a request the backend
// takes whole: decode it strictly, validate it, call the backend with the
// caller's credentials, answer with status and the result as JSON.
func call[Req any, P validated[Req], Resp any](status int, fn func(context.Context, Peer, P) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ok := body[Req, P](w, r)
		if !ok {
			return
		}
		res, err := fn(r.Context(), peer(r), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, status, res)
	}
}

// streamCall is call for an endpoint that may stream its progress
// (Server.streamed).
func streamCall[Req any, P validated[Req], Resp any](s *Server, status int, fn func(context.Context, Peer, P) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ok := body[Req, P](w, r)
		if !ok {
			return
		}
		s.streamed(w, r, status, func(ctx context.Context) (any, error) { return fn(ctx, peer(r), req) })
	}
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var req ReleaseRequest
	if !decode(w, r, &req, true) {
		return
	}
	if req.Grace != nil && time.Duration(*req.Grace) > MaxGrace {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("grace over %v", MaxGrace))
		return
	}
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeErr(w, err)
		return
	}
	s.streamed(w, r, http.StatusOK, func(ctx context.Context) (any, error) {
		return s.b.Release(ctx, peer(r), id, &req)
	})
}

// A page of claims is bounded by its bytes as well as by its count: its
// JSON ends before the claim that would take it over maxListBytes (a
// first claim always goes), or, for a non-root uid, after the claim that
// empties the uid's bucket, and the next cursor then names the last claim
// sent. The page is asked of the backend in chunks, so that claims read
// and not sent are few (firstListChunk, then as many as the bytes left
// would hold at the size of those so far, at most maxListChunk), and
// each chunk is dropped once encoded: an answer holds maxListBytes and a
// claim at most while its client reads it, however slowly. Before, a page
// of 1,000 claims of bulky argv was built whole, 60 MB with '<' written
// as \u003c, and held for as long as its client did not read.
const (
	maxListBytes   = 256 << 10
	firstListChunk = 16
	maxListChunk   = 256
)

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q, err := listQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	p := peer(r)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('[')
	sent, next, last := 0, "", ""
	chunk := firstListChunk
	for sent < q.Limit {
		cq := q
		cq.Limit = min(chunk, q.Limit-sent)
		cs, more, err := s.b.List(r.Context(), p, cq)
		if err != nil {
			if sent == 0 {
				writeErr(w, err)
				return
			}
			next = last // what was sent stands; the client asks on from there
			break
		}
		s.pay(p, float64(len(cs))/claimsPerToken)
		full := false
		for i := range cs {
			mark := buf.Len()
			if sent > 0 {
				buf.WriteByte(',')
			}
			if err := enc.Encode(&cs[i]); err != nil {
				writeError(w, http.StatusInternalServerError, "encoding claim "+cs[i].ID+": "+err.Error())
				return
			}
			buf.Truncate(buf.Len() - 1) // Encode's newline
			if sent > 0 && buf.Len()+2 > maxListBytes {
				buf.Truncate(mark)
				full = true
				break
			}
			sent, last = sent+1, cs[i].ID
			if !s.pay(p, float64(buf.Len()-mark)/listBytesPerToken) {
				full = i+1 < len(cs) || more != ""
				break
			}
		}
		switch {
		case full:
			next = last
		case more == "" || sent == q.Limit:
			next = more
		default:
			q.After = more
			chunk = min(maxListChunk, max(1, (maxListBytes-buf.Len())*sent/max(buf.Len(), 1)))
			continue
		}
		break
	}
	buf.WriteString("]\n")
	if next != "" {
		w.Header().Set(NextCursorHeader, next)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// listQuery reads and checks the query of GET /claims.
func listQuery(v url.Values) (ListQuery, error) {
	q := ListQuery{After: v.Get("after"), Owner: v.Get("owner"), State: v.Get("state"), Limit: MaxListLimit}
	if q.After != "" {
		if err := validID(q.After); err != nil {
			return q, err
		}
	}
	if len(q.Owner) > MaxOwner || len(q.State) > 32 {
		return q, bad("owner or state filter too long")
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxListLimit {
			return q, bad("limit %q: want 1 to %d", l, MaxListLimit)
		}
		q.Limit = n
	}
	if u := v.Get("uid"); u != "" {
		n, err := strconv.ParseUint(u, 10, 32)
		if err != nil {
			return q, bad("uid %q: want a number", u)
		}
		uid := uint32(n)
		q.UID = &uid
	}
	return q, nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeErr(w, err)
		return
	}
	c, err := s.b.Get(r.Context(), peer(r), id)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// output answers the bytes of a job's output: offset (default 0) and
// length (default and cap MaxOutputRead) from the query; an offset at or
// past the end answers no bytes. The total size is in OutputSizeHeader.
func (s *Server) output(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeErr(w, err)
		return
	}
	q := r.URL.Query()
	num := func(name string, def int64) (int64, bool) {
		v := q.Get(name)
		if v == "" {
			return def, true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, name+": want a number of bytes, not negative")
			return 0, false
		}
		return n, true
	}
	offset, ok := num("offset", 0)
	if !ok {
		return
	}
	length, ok := num("length", MaxOutputRead)
	if !ok {
		return
	}
	length = min(length, MaxOutputRead)
	out, err := s.b.Output(r.Context(), peer(r), id, offset, length)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(OutputSizeHeader, strconv.FormatInt(out.Size, 10))
	w.Header().Set(OutputOffsetHeader, strconv.FormatInt(max(out.Offset, offset), 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(out.Data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Data)
	s.charge(peer(r), len(out.Data), outputBytesPerToken)
}

func (s *Server) reap(w http.ResponseWriter, r *http.Request) {
	var req ReapRequest
	if !decode(w, r, &req, true) {
		return
	}
	rep, err := s.b.Reap(r.Context(), peer(r), &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	s.charge(peer(r), rep.Seen, claimsPerToken)
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.b.Status(r.Context(), peer(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	s.charge(peer(r), st.Claims, storedClaimsPerToken)
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) tree(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pid, err := strconv.ParseInt(q.Get("pid"), 10, 32)
	if err != nil || pidfd.CheckPid(pid) != nil {
		writeError(w, http.StatusBadRequest, "pid: want a process id")
		return
	}
	var tok token.Token
	if t := q.Get("token"); t != "" {
		if len(t) > MaxString {
			writeError(w, http.StatusBadRequest, "token too long")
			return
		}
		var err error
		if tok, err = token.Parse(t); err != nil {
			writeError(w, http.StatusBadRequest, "token: "+err.Error())
			return
		}
	}
	nodes, walked, err := s.b.Tree(r.Context(), peer(r), int32(pid), tok)
	// Charged for what it walked: under hidepid the answer shows the
	// caller its own processes only, and a walk of another user's
	// thousands cost the daemon as much as showing them.
	s.charge(peer(r), walked, treeNodesPerToken)
	if err != nil {
		writeErr(w, err)
		return
	}
	if nodes == nil {
		nodes = []TreeNode{}
	}
	writeJSON(w, http.StatusOK, nodes)
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrBadRequest)
}

func checkString(name, s string, max int) error {
	if len(s) > max {
		return bad("%s: over %d bytes", name, max)
	}
	if !utf8.ValidString(s) {
		return bad("%s: not valid UTF-8", name)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return bad("%s: contains NUL", name)
	}
	return nil
}

// validID checks a claim id from a path with the store's own rule.
func validID(id string) error {
	if !store.ValidID(store.Grant, id) && !store.ValidID(store.Job, id) {
		return bad("claim id %q is malformed", Trunc(id, 40))
	}
	return nil
}

// Validate checks a LaunchRequest against the bounds.
func (r *LaunchRequest) Validate() error {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return bad("argv: want at least a program")
	}
	if len(r.Argv) > MaxArgs {
		return bad("argv: over %d entries", MaxArgs)
	}
	n := 0
	for i, a := range r.Argv {
		if err := checkString(fmt.Sprintf("argv[%d]", i), a, MaxString); err != nil {
			return err
		}
		n += len(a)
	}
	if n > MaxArgvBytes {
		return bad("argv: over %d bytes", MaxArgvBytes)
	}
	if len(r.Env) > MaxEnv {
		return bad("env: over %d entries", MaxEnv)
	}
	n = 0
	for i, e := range r.Env {
		if err := checkString(fmt.Sprintf("env[%d]", i), e, MaxString); err != nil {
			return err
		}
		if !strings.Contains(e, "=") {
			return bad("env[%d]: want KEY=VALUE", i)
		}
		n += len(e)
	}
	if n > MaxEnvBytes {
		return bad("env: over %d bytes", MaxEnvBytes)
	}
	if err := checkString("cwd", r.Cwd, MaxString); err != nil {
		return err
	}
	if r.Cwd != "" && r.Cwd[0] != '/' {
		return bad("cwd: want an absolute path")
	}
	if err := checkString("owner", r.Owner, MaxOwner); err != nil {
		return err
	}
	if time.Duration(r.WallClock) > MaxWallClock {
		return bad("wall_clock: over %v", MaxWallClock)
	}
	if r.Holder != nil {
		if !r.Bind {
			return bad("holder without bind")
		}
		if r.Detach {
			return bad("a job cannot be bound to a holder")
		}
		if err := checkInstance(r.Holder.Pid, r.Holder.Token); err != nil {
			return fmt.Errorf("holder: %w", err)
		}
	}
	if r.Bind && r.Detach {
		return bad("a job cannot be bound to a holder")
	}
	return nil
}

func checkInstance(pid int32, tok token.Token) error {
	if err := pidfd.CheckPid(int64(pid)); err != nil {
		return bad("pid %d: %v", pid, err)
	}
	if tok.IsZero() {
		return bad("token: missing (a pid alone proves nothing)")
	}
	return nil
}

// Validate checks an AdmitRequest.
func (r *AdmitRequest) Validate() error {
	if err := checkInstance(r.Pid, r.Token); err != nil {
		return err
	}
	return checkString("owner", r.Owner, MaxOwner)
}

// Validate checks a ClaimRequest.
func (r *ClaimRequest) Validate() error {
	if err := checkInstance(r.Pid, r.Token); err != nil {
		return err
	}
	if r.Grace != nil && time.Duration(*r.Grace) > MaxGrace {
		return bad("grace over %v", MaxGrace)
	}
	return nil
}

// maxReqUsers is how many uids' request accounting is kept before the
// entries of uids at rest (a full bucket, nothing in flight) are dropped.
const maxReqUsers = 1024

// reqUser returns the request accounting of uid, made with a full bucket
// when there is none. s.mu is held.
func (s *Server) reqUser(uid uint32, now time.Time) *reqUser {
	if u := s.reqs[uid]; u != nil {
		return u
	}
	burst := float64(s.lim.Burst)
	if len(s.reqs) >= maxReqUsers {
		for k, x := range s.reqs {
			if x.long == [2]int{} && x.tokens+now.Sub(x.at).Seconds()*s.lim.Rate >= burst {
				delete(s.reqs, k)
			}
		}
	}
	u := &reqUser{tokens: burst, at: now}
	s.reqs[uid] = u
	return u
}

// take takes a token from p's bucket, or says how long until there is one.
// Root is not rate-capped.
func (s *Server) take(p Peer, now time.Time) (time.Duration, bool) {
	if p.Root() {
		return 0, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.reqUser(p.Share(), now)
	u.tokens = min(float64(s.lim.Burst), u.tokens+max(now.Sub(u.at), 0).Seconds()*s.lim.Rate)
	u.at = now
	if u.tokens >= 1 {
		u.tokens--
		return 0, true
	}
	return time.Duration((1 - u.tokens) / s.lim.Rate * float64(time.Second)), false
}

// A request that reads much takes, once answered, a token more from its
// uid's bucket per so many things it read: a tree per node (each a /proc
// read of its command line), a page of claims or a dry run per claim (a
// store read, a judgement), the status per stored claim (it counts them
// all). The bucket may go below zero, and the uid's next requests then
// wait until it has paid. Before, one token bought any of these: with
// 430 processes on the host a tree cost the daemon 30 ms of CPU, and at
// 100 requests a second one uid kept both cores of this VM busy (more
// with processes of its own to fill the tree). About 0.5 ms of the
// daemon's CPU a token, measured here.
//
// A page of claims also costs a token per listBytesPerToken bytes of its
// JSON, charged claim by claim as it is encoded (Server.list): a page of
// bulky claims costs what sending it costs, not what its count says. A
// read of a job's output costs a token per outputBytesPerToken bytes it
// answered: one token bought a megabyte, and one uid reading in a loop
// cost the daemon twice the CPU of as many `show`s.
const (
	treeNodesPerToken    = 10
	claimsPerToken       = 20
	storedClaimsPerToken = 50
	listBytesPerToken    = 64 << 10
	outputBytesPerToken  = 64 << 10
)

// charge takes n/per tokens from p's bucket (root is not rate-capped).
func (s *Server) charge(p Peer, n, per int) {
	if p.Root() || n < per {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqUser(p.Share(), time.Now()).tokens -= float64(n) / float64(per)
}

// pay takes n tokens from p's bucket, a fraction as well, and reports
// whether the bucket holds any still (root is not rate-capped: always).
func (s *Server) pay(p Peer, n float64) bool {
	if p.Root() {
		return true
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.reqUser(p.Share(), now)
	u.tokens = min(float64(s.lim.Burst), u.tokens+max(now.Sub(u.at), 0).Seconds()*s.lim.Rate)
	u.at = now
	u.tokens -= n
	return u.tokens > 0
}

// longLived marks h as a long-lived request: a release or a kill waits out
// a grace period (up to MaxGrace), as any future wait, watch or event
// stream would. It may write its answer for MaxGrace longer than a short
// request, and a non-root uid has at most UserLong of them in flight; over
// that, 429 at once. A streaming endpoint must also write a heartbeat at
// least every IdleTimeout/2, so that its client and any proxy see it live.
func (s *Server) longLived(class longClass, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := peer(r)
		if !p.Root() {
			s.mu.Lock()
			u := s.reqUser(p.Share(), time.Now())
			if u.long[class] >= s.lim.UserLong {
				n := u.long[class]
				s.mu.Unlock()
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusTooManyRequests, fmt.Sprintf("uid %d has %d %s in flight (cap %d)", p.Share(), n, longNames[class], s.lim.UserLong))
				return
			}
			u.long[class]++
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				u.long[class]--
				s.mu.Unlock()
			}()
		}
		// Not every ResponseWriter has a deadline (a test's recorder).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(MaxGrace + time.Duration(s.lim.RequestTimeout)))
		h(w, r)
	}
}
