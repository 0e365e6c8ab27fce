package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/boottime"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/token"
)

// This file is the daemon's event stream (api.Streamer, GET /v1/events):
// process events and claim events fanned out to subscribers.
//
// The event path pays for subscribers only when there are some: with none,
// one atomic load. With some, each event is attributed once (its uid and
// claim), encoded once into a buffer of the drain goroutine (and once
// more for each view of other users that withholds something of it, see
// below), and copied into the buffer of each subscriber allowed to see
// it, under that
// subscriber's lock, which its reader holds only to swap buffers. A
// subscriber whose buffer is full loses the event, counted, and a lost
// record takes its place (before the next record kept, or at the end of
// what the reader takes). Records of long arguments are held beside the
// buffer, within a budget of their own (largeBudget, largeTotal). Nothing
// on the event path waits for a reader or allocates (a large record
// grows a buffer, which its reader's next take lets go).
//
// Limits: a process event is attributed to the real uid its exec context
// carries (eBPF's fork and exec records, or /proc when netlink or polling
// fill it), else to the uid the graph kept from that instance's last
// context (an exit), else to the owner of the claim the process belongs to
// through birth lineage; a process with none of these is shown to root
// only.
//
// What a user sees. Root's stream is whole. A subscriber other than root
// is shown of an event only what it could read itself in /proc, where the
// executable and working directory (/proc/PID/exe, cwd) need ptrace
// access (the same real, effective and saved uid and gid, and a dumpable
// process) and a proc mounted with hidepid hides the processes the reader
// may not ptrace whole:
//   - the event's own exe and working directory are withheld unless its
//     context says the process is wholly the subscriber's: real, effective
//     and saved uid its uid, and real, effective and saved gid its gid (a
//     setuid program it ran is root's to read, and so is what that program
//     execs as root after a chdir);
//   - the parent's exe and working directory are always withheld: the
//     parent's description (internal/execcache) is of its last exec, or
//     of the image it inherited at its fork, with ids refreshed at its
//     forks, so it cannot prove the parent readable (a root process that
//     exec'd, chdir'd and setuid() to the user since is not dumpable, and
//     a setuid(2) is no event). A parent that is the subscriber's own has
//     them on its own exec event;
//   - the exe and argv of an image exec'd with ids not proven the ones
//     the event carries (events.ExecInfo.OtherIDs: a fork's, which runs
//     its parent's image, when the parent's ids changed since its exec;
//     an exit's, which carries no ids) are withheld, and so is the argv of
//     such a parent: a root program that overwrote a password on its
//     command line and dropped to the user would show it;
//   - interactive, pid_ns and mnt_ns of an event not wholly the
//     subscriber's are withheld (/proc/PID/fd and ns need ptrace access),
//     and the parent's interactive always, for the reason above;
//   - the argv of a parent not wholly the subscriber's: the description
//     holds it as it was at the parent's exec, and /proc shows another
//     user's arguments as they are now (a process that overwrote a
//     password on its command line hid it there);
//   - when the daemon's /proc hides other users' processes (hidepid, read
//     at subscription), the argv of an event not wholly the subscriber's,
//     its parent_token and its session and group leaders' entity_id (their
//     pids the subscriber reads, their start times not), and the whole
//     parent description are withheld too.
//
// The comm, the ids, the session, group, terminal and cgroup, which
// /proc/PID/stat, status and cgroup give every reader without hidepid,
// are kept (under hidepid too: the event is attributed to the
// subscriber, see Limits). What is withheld is named in "withheld" (exe,
// working_directory, argv, parent.exe, parent.working_directory, parent,
// parent.argv, interactive, pid_ns, mnt_ns, parent_token, session_leader.entity_id,
// group_leader.entity_id, parent.interactive), so an absent field is never
// read as not captured; a token that is not known is written as null, not
// withheld. An event with no context (an exit) is not shown to be wholly
// the subscriber's. The exec context does not say whether a process is
// dumpable: an exec of a file the user may not read, or one that gains
// file capabilities, is not, and its exe, working directory, interactive,
// pid_ns and mnt_ns are still shown to its owner. Still shown too, under hidepid:
// the tokens of the parent and leaders of a process wholly the
// subscriber's, whose start times it may not read either when they are
// another user's (a root parent or session leader).

const (
	// streamBuffer is what a subscriber may have unread, in bytes (about
	// 300 records), in each of its two buffers, of records up to
	// largeRecord bytes.
	streamBuffer = 64 << 10
	// largeRecord: a record over it (an exec with long arguments, or a
	// process whose parent's are: about 34 KB at argv_max) counts against
	// largeBudget instead, held beside the buffer until the reader takes
	// it, and against largeTotal over all subscribers. Two such execs in
	// one of the event path's batches overflowed a 64 KiB buffer before
	// any reader could run: a user running two programs with long
	// arguments made root's stream lose other users' events.
	largeRecord = 4 << 10
	largeBudget = 1 << 20
	largeTotal  = 32 << 20
	// largeShare is the part of largeTotal root's subscribers hold
	// together, and the part all other uids' hold together: nine users
	// each holding four streams they never read (a paused `supervisor
	// events | less`) filled a total they shared with root, and root's
	// audit stream lost every long exec after.
	largeShare = largeTotal / 2
	// maxStreams caps root's subscribers, and those of all other uids
	// together (each uid is also capped by the API's long-lived request
	// limit).
	maxStreams = 64
)

// eventUID returns the uid an event carries (the process's real uid, from
// the exec context eBPF captures; fork records inherit it), and whether it
// carries one. Exit records and the other mechanisms carry none: those
// events are attributed through the claim they belong to.
func eventUID(ev *events.Event) (uint32, bool) { return ev.Ctx.UID, ev.Ctx.Has(events.CtxIDs) }

// hub fans stream records out to subscribers. Its zero value has none.
type hub struct {
	subs atomic.Pointer[[]*subscriber] // copied on write, under mu
	// changed, when set, is called after a subscriber came or went (the
	// tracker's ExecContextChanged: eBPF captures exec arguments only
	// while something shows them).
	changed atomic.Pointer[func()]

	mu     sync.Mutex
	closed bool

	// largeHeld is the bytes of large records root's subscribers hold
	// ([1]) and all others' ([0]); largeShare caps each.
	largeHeld [2]atomic.Int64

	// The event path's own (drain goroutine): its encoding buffer, one
	// for each view of other users' subscribers (empty when the view
	// withheld nothing) with the event and parent it encoded, and the
	// clock that gives events their wall time.
	evBuf         []byte
	viewBuf       [views][]byte
	enc           events.Encoder // the drain goroutine's, as the buffers
	limited       events.Event
	limitedParent events.Desc
	clock         boottime.Clock

	claimMu  sync.Mutex
	claimBuf []byte
}

// subscriber is one stream: two buffers, the one events are appended to
// and the one its reader holds, swapped when the reader takes.
type subscriber struct {
	h *hub
	viewer
	kinds api.StreamKinds // what it asked for (losses always)
	wake  chan struct{}   // one token: something to take

	mu     sync.Mutex
	buf    []byte // appended to by publishers
	spare  []byte // the reader's
	lost   uint64 // records dropped since the last record kept or take
	large  int    // bytes of buf in records over largeRecord (see put)
	closed bool
}

// viewer is who a subscriber is: root (all), who sees everything, or a
// uid, shown its own events less what it could not read in /proc (see
// the file's comment): gid is its group, hidden whether its /proc or the
// daemon's hid other users' processes (hidepid) when it came.
type viewer struct {
	uid, gid uint32
	all      bool
	hidden   bool
}

// attribution is who an event is of: the uid (uidOK false when unknown)
// and the claim ("" for none).
type attribution struct {
	uid   uint32
	uidOK bool
	claim string
	// The uid of claim's owner (claimOwner), looked up in owners only
	// when a subscriber's view asks: another user's claim is not named
	// to a subscriber (Tree's rule).
	owners     *claimIndex
	ownerRead  bool
	claimUID   uint32
	claimUIDOK bool
}

// claimOwner returns the uid of the owner of a's claim (false when it is
// no longer indexed), read from the index once per event.
func (a *attribution) claimOwner() (uint32, bool) {
	if !a.ownerRead && a.owners != nil {
		a.claimUID, a.claimUIDOK = a.owners.uidOf(a.claim)
	}
	a.ownerRead = true
	return a.claimUID, a.claimUIDOK
}

// Subscribe implements api.Streamer.
func (d *Daemon) Subscribe(ctx context.Context, p api.Peer, k api.StreamKinds) (api.Stream, error) {
	if err := d.serves(p); err != nil {
		return nil, err
	}
	v := viewer{uid: p.UID, gid: p.GID, all: p.Root()}
	v.hidden = d.procHiddenFrom(ctx, p)
	return d.log.hub.subscribe(v, k)
}

func (h *hub) subscribe(v viewer, kinds api.StreamKinds) (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("the daemon is stopping: %w", api.ErrUnavailable)
	}
	var subs []*subscriber
	if p := h.subs.Load(); p != nil {
		subs = *p
	}
	// Root's streams and the other uids' have a cap each: users
	// together never lock root out.
	n, whose := 0, "other users'"
	if v.all {
		whose = "root's"
	}
	for _, x := range subs {
		if x.all == v.all {
			n++
		}
	}
	if n >= maxStreams {
		return nil, fmt.Errorf("%d of %s event streams open (cap %d): %w", n, whose, maxStreams, api.ErrUnavailable)
	}
	s := &subscriber{h: h, viewer: v, kinds: kinds, wake: make(chan struct{}, 1),
		buf: make([]byte, 0, streamBuffer), spare: make([]byte, 0, streamBuffer)}
	next := append(append(make([]*subscriber, 0, len(subs)+1), subs...), s)
	h.subs.Store(&next)
	h.notify()
	return s, nil
}

// notify calls changed, if set; with mu held, so that the calls follow
// the changes in order.
func (h *hub) notify() {
	if f := h.changed.Load(); f != nil {
		(*f)()
	}
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.subs.Load()
	if p == nil {
		return
	}
	next := make([]*subscriber, 0, len(*p))
	for _, x := range *p {
		if x != s {
			next = append(next, x)
		}
	}
	h.subs.Store(&next)
	h.notify()
}

// close ends every stream (after what is buffered) and refuses new ones:
// the daemon is stopping.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if p := h.subs.Load(); p != nil {
		for _, s := range *p {
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			s.signal()
		}
	}
}

// streaming reports whether a subscriber is open. Not active() != nil:
// after the last one leaves, active returns an empty slice, not nil.
func (h *hub) streaming() bool { return len(h.active()) > 0 }

// active returns the subscribers, nil or empty when there are none.
func (h *hub) active() []*subscriber {
	if p := h.subs.Load(); p != nil {
		return *p
	}
	return nil
}

// onEventStream is the tracker's OnEvent: the daemon's event path, then
// the stream.
func (d *Daemon) onEventStream(ev *events.Event) {
	d.onEvent(ev)
	h := &d.log.hub
	subs := h.active()
	if len(subs) == 0 {
		return
	}
	h.publishEvent(subs, ev, d.attribute(ev))
}

// attribute says whose ev is (attributeIn, with the tracker's graph).
func (d *Daemon) attribute(ev *events.Event) attribution {
	var g attributor
	if tr := d.tr.Load(); tr != nil {
		g = tr.Graph()
	}
	return attributeIn(g, d.claims, ev)
}

// attributor is the lineage graph as attribution uses it.
type attributor interface {
	Attribution(pid int32, tok token.Token) (root string, uid uint32, uidOK bool)
}

// attributeIn says whose ev is: the uid it carries, else the uid the graph
// kept from the instance's last context, else the owner of the claim g
// says it belongs to through birth lineage (g may be nil). One graph
// lookup per event.
func attributeIn(g attributor, claims *claimIndex, ev *events.Event) attribution {
	var a attribution
	a.uid, a.uidOK = eventUID(ev)
	if g == nil || ev.Kind == events.Lost || ev.Token.IsZero() {
		return a
	}
	root, uid, uidOK := g.Attribution(ev.Pid, ev.Token)
	if !a.uidOK && uidOK {
		// An exit (or an event of a mechanism without contexts): the
		// uid the graph kept from the instance's last context.
		a.uid, a.uidOK = uid, true
	}
	if root != "" {
		a.claim, a.owners = root, claims
		if !a.uidOK {
			a.uid, a.uidOK = a.claimOwner()
		}
	}
	return a
}

// uidOf returns the uid of claim id.
func (x *claimIndex) uidOf(id string) (uint32, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m, ok := x.byID[id]
	return m.uid, ok
}

// publishEvent encodes ev once and hands it to every subscriber that may
// see it: root's whole, another uid's with what it may not read withheld
// (encoded once for each of the few views, only when something is).
// Only the drain goroutine calls it.
func (h *hub) publishEvent(subs []*subscriber, ev *events.Event, a attribution) {
	k := streamKind(ev.Kind)
	if !slices.ContainsFunc(subs, func(s *subscriber) bool { return s.kinds.Has(k) }) {
		return // nobody asked for this kind: not even encoded
	}
	wall := h.clock.At(ev.Time)
	b := appendRecord(&h.enc, h.evBuf[:0], ev, a, wall, 0)
	h.evBuf = b
	var made uint16 // the views encoded for this event (a bit each)
	for _, s := range subs {
		if !s.kinds.Has(k) {
			continue
		}
		switch {
		case s.all || ev.Kind == events.Lost:
			s.put(b)
		case a.uidOK && a.uid == s.uid:
			v := s.view(ev, &a)
			if made&(1<<v) == 0 {
				made |= 1 << v
				w := limit(&h.limited, &h.limitedParent, ev, v)
				h.viewBuf[v] = h.viewBuf[v][:0]
				switch {
				case w != 0:
					h.viewBuf[v] = appendRecord(&h.enc, h.viewBuf[v], &h.limited, a.shown(v), wall, w)
				case v&viewClaimOther != 0:
					h.viewBuf[v] = appendRecord(&h.enc, h.viewBuf[v], ev, a.shown(v), wall, 0)
				}
			}
			if len(h.viewBuf[v]) == 0 {
				s.put(b) // nothing withheld
			} else {
				s.put(h.viewBuf[v])
			}
		}
	}
}

// appendRecord appends ev as a stream record (AppendJSON with the time,
// the attribution and what was withheld, through enc) and a newline.
func appendRecord(enc *events.Encoder, b []byte, ev *events.Event, a attribution, wall time.Time, w withheld) []byte {
	b = enc.AppendJSONTime(b, ev, omitOf(w), wall)
	b = b[:len(b)-1] // reopen the object
	if a.uidOK {
		b = append(b, `,"uid":`...)
		b = strconv.AppendUint(b, uint64(a.uid), 10)
	}
	if a.claim != "" {
		b = append(b, `,"claim":`...)
		b = strconv.AppendQuote(b, a.claim) // a store id: plain ASCII
	}
	if w != 0 {
		b = append(b, `,"withheld":[`...)
		sep := ""
		for i, name := range withheldNames {
			if w&(1<<i) != 0 {
				b = append(append(b, sep...), '"')
				b = append(append(b, name...), '"')
				sep = ","
			}
		}
		b = append(b, ']')
	}
	return append(b, '}', '\n')
}

// view is what a subscriber other than root is shown of an event: bit
// viewOther when the event's context does not say the process is wholly
// the subscriber's, bit viewHidden when /proc hides other users', bit
// viewParentOther when the parent's context does not say it is wholly the
// subscriber's, bit viewClaimOther when the process is in a claim that is
// not proven the subscriber's (its id is not named).
type view uint8

const (
	viewOther view = 1 << iota
	viewHidden
	viewParentOther
	viewClaimOther
	views = 1 << iota
)

// publishEvent keeps a bit for each view in a uint16.
const _ uint16 = 1<<views - 1

// view returns what s (not root) is shown of ev, attributed a.
func (s *subscriber) view(ev *events.Event, a *attribution) view {
	var v view
	if !whollyOf(&ev.Ctx, s.uid, s.gid) {
		v |= viewOther
	}
	if s.hidden {
		v |= viewHidden
	}
	if p := ev.Parent; p != nil && !whollyOf(&p.Ctx, s.uid, s.gid) {
		v |= viewParentOther
	}
	if a.claim != "" {
		if uid, ok := a.claimOwner(); !ok || uid != s.uid {
			v |= viewClaimOther
		}
	}
	return v
}

// shown is a as view v shows it: without the claim of another user.
func (a attribution) shown(v view) attribution {
	if v&viewClaimOther != 0 {
		a.claim = ""
	}
	return a
}

// whollyOf reports whether c says its process is wholly uid's and gid's,
// as ptrace access (and so /proc/PID/exe and cwd) asks: real, effective
// and saved uid and gid all theirs, and the process dumpable.
func whollyOf(c *events.Context, uid, gid uint32) bool {
	return c.Has(events.CtxIDs) && c.UID == uid && c.EUID == uid && c.SUID == uid &&
		c.GID == gid && c.EGID == gid && c.SGID == gid && !c.Undumpable
}

// withheld has a bit for each field a view withheld (withheldNames).
type withheld uint16

const (
	heldExe withheld = 1 << iota
	heldCwd
	heldArgv
	heldParentExe // heldExe*heldParentExe is heldParentExe, heldCwd*heldParentExe heldParentCwd
	heldParentCwd
	heldParent
	heldParentArgv
	omitShift = iota // where events.Omit's bits start
	// The fields the encoder leaves out: events.Omit's bits, in its
	// order, above these (omitOf).
	heldInteractive       = withheld(events.OmitInteractive) << omitShift
	heldPidNS             = withheld(events.OmitPidNS) << omitShift
	heldMntNS             = withheld(events.OmitMntNS) << omitShift
	heldParentToken       = withheld(events.OmitParentToken) << omitShift
	heldSessionLeaderID   = withheld(events.OmitSessionLeaderID) << omitShift
	heldGroupLeaderID     = withheld(events.OmitGroupLeaderID) << omitShift
	heldParentInteractive = withheld(events.OmitParentInteractive) << omitShift
)

var withheldNames = [...]string{"exe", "working_directory", "argv", "parent.exe", "parent.working_directory", "parent", "parent.argv",
	"interactive", "pid_ns", "mnt_ns", "parent_token", "session_leader.entity_id", "group_leader.entity_id", "parent.interactive"}

// omitOf returns what the encoder is to leave out of an event of which w
// was withheld (the fields limit cannot clear: they are written whenever
// there is a context).
func omitOf(w withheld) events.Omit { return events.Omit(w >> omitShift) }

// limit sets dst to ev as view v shows it (the parent's description,
// when kept, in pd) and returns what it withheld of what ev had: nothing
// when ev has none of it, and dst is then not to be used. The strings
// are ev's: dst is valid as long as ev.
func limit(dst *events.Event, pd *events.Desc, ev *events.Event, v view) withheld {
	var w withheld
	*dst = *ev
	if v&viewOther != 0 || ev.Exec.OtherIDs {
		w |= withhold(&dst.Exe, &dst.Exec)
	}
	if ev.Exec.OtherIDs {
		// An image exec'd with ids not proven the subscriber's (a fork's,
		// its parent's): its arguments as that exec had them.
		w |= withholdArgv(dst)
	}
	if v&viewOther != 0 {
		if ev.Ctx.Has(events.CtxSession) {
			w |= heldInteractive // /proc/PID/fd: ptrace access
		}
		if ev.Ctx.Valid {
			w |= heldPidNS | heldMntNS // /proc/PID/ns: ptrace access
		}
		// Its arguments as its exec had them, as for a parent: a process
		// not wholly the subscriber's (a setuid program, or one running
		// with ids it kept from root) chose them with rights the
		// subscriber lacks, and may have overwritten a secret among them
		// since, which /proc then no longer shows.
		w |= withholdArgv(dst)
		if v&viewHidden != 0 {
			w |= heldTokens(ev)
		}
	}
	switch p := ev.Parent; {
	case p == nil:
	case v&viewHidden != 0:
		w |= heldParent
		dst.Parent = nil
	default:
		*pd = *p
		w |= withhold(&pd.Exe, &pd.Exec) * heldParentExe
		if v&viewParentOther != 0 || p.Exec.OtherIDs {
			// Its argv as it was at its exec: /proc shows another
			// user's process's arguments as they are now, and one that
			// overwrote them (a password on its command line) hid them;
			// so does one exec'd with other ids that dropped to the
			// subscriber's since.
			if len(pd.Argv) > 0 || pd.Exec.ArgsCount > 0 {
				w |= heldParentArgv
			}
			pd.Argv = nil
			pd.Exec.ArgsCount, pd.Exec.ArgsSize, pd.Exec.ArgsTruncated, pd.Exec.ArgsRedacted = 0, 0, false, false
		}
		if p.Ctx.Has(events.CtxSession) {
			w |= heldParentInteractive // the parent's /proc/PID/fd, not proven readable
		}
		dst.Parent = pd
	}
	return w
}

// withholdArgv clears the arguments of dst and their counts and marks, and
// returns heldArgv when it had any.
func withholdArgv(dst *events.Event) withheld {
	var w withheld
	if len(dst.Argv) > 0 || dst.Exec.ArgsCount > 0 {
		w = heldArgv
	}
	dst.Argv = nil
	dst.Exec.ArgsCount, dst.Exec.ArgsSize, dst.Exec.ArgsTruncated, dst.Exec.ArgsRedacted = 0, 0, false, false
	return w
}

// heldTokens returns which of the tokens of ev's parent and leaders it
// has (a zero one is written as null, unknown: nothing to withhold).
func heldTokens(ev *events.Event) withheld {
	var w withheld
	if !ev.ParentToken.IsZero() {
		w |= heldParentToken
	}
	if ev.Ctx.Valid && !ev.Ctx.SessionLeader.IsZero() {
		w |= heldSessionLeaderID
	}
	if ev.Ctx.Valid && !ev.Ctx.GroupLeader.IsZero() {
		w |= heldGroupLeaderID
	}
	return w
}

// withhold clears an executable and working directory, and returns which
// of them it cleared (heldExe, heldCwd).
func withhold(exe *string, x *events.ExecInfo) withheld {
	var w withheld
	if *exe != "" {
		w |= heldExe
	}
	if x.Cwd != "" {
		w |= heldCwd
	}
	*exe, x.ExeTruncated, x.ExeDeleted = "", false, false
	x.Cwd, x.CwdTruncated, x.CwdDeleted = "", false, false
	return w
}

// streamKind is the stream kind of an event of kind k; every subscriber
// has a loss (all bits).
func streamKind(k events.Kind) api.StreamKinds {
	switch k {
	case events.Fork:
		return api.StreamFork
	case events.Exec:
		return api.StreamExec
	case events.Exit:
		return api.StreamExit
	}
	return ^api.StreamKinds(0)
}

// claimRecord is a claim event on the wire (api.StreamRecord's fields).
type claimRecord struct {
	Kind      string `json:"kind"`
	Time      string `json:"time"`
	Action    string `json:"action"`
	Claim     string `json:"claim"`
	ClaimKind string `json:"claim_kind,omitempty"`
	Owner     string `json:"owner,omitempty"`
	UID       uint32 `json:"uid"`
	From      string `json:"from,omitempty"`
	State     string `json:"state,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Pid       int32  `json:"pid,omitempty"`
	Token     string `json:"token,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Signal    int    `json:"signal,omitempty"`
}

// Claim logs something that happened to a claim and streams it to root
// and to the claim's uid.
func (f *feed) Claim(ev logfeed.ClaimEvent) {
	f.Logger.Claim(ev)
	f.hub.publishClaim(&ev, time.Now())
}

func (h *hub) publishClaim(ev *logfeed.ClaimEvent, now time.Time) {
	subs := h.active()
	if len(subs) == 0 {
		return
	}
	r := claimRecord{Kind: "claim", Time: now.UTC().Format(time.RFC3339Nano), Action: ev.Action, Claim: ev.ClaimID,
		ClaimKind: ev.Kind, Owner: ev.Owner, UID: ev.UID, From: ev.From, State: ev.State, Reason: ev.Reason,
		Pid: ev.Pid, ExitCode: ev.ExitCode, Signal: ev.Signal}
	if !ev.Token.IsZero() {
		r.Token = ev.Token.String()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return
	}
	h.claimMu.Lock()
	defer h.claimMu.Unlock()
	b := append(append(h.claimBuf[:0], line...), '\n')
	h.claimBuf = b
	for _, s := range subs {
		if s.kinds.Has(api.StreamClaim) && (s.all || s.uid == ev.UID) {
			s.put(b)
		}
	}
}

// put appends a record, or counts it lost when it does not fit: a record
// up to largeRecord bytes in the buffer's streamBuffer, a larger one in
// the subscriber's largeBudget and its side's largeShare. A record kept
// after some were lost comes after a lost record that counts them, in
// their place (the ones after a loss were all refused until the reader's
// next take, however small).
func (s *subscriber) put(rec []byte) {
	s.mu.Lock()
	if s.closed {
		// Before the share is charged: Close has given back what s
		// held, and nothing would give back a charge made after it (a
		// publish that took s from the list before it unsubscribed).
		s.mu.Unlock()
		return
	}
	large := len(rec) > largeRecord
	fits := !large && len(s.buf)-s.large+len(rec) <= streamBuffer
	if large && s.large+len(rec) <= largeBudget {
		if s.held().Add(int64(len(rec))) <= largeShare {
			fits = true
		} else {
			s.held().Add(-int64(len(rec)))
		}
	}
	if !fits {
		s.lost++
		s.mu.Unlock()
		s.signal()
		return
	}
	if s.lost > 0 {
		s.buf = appendLost(s.buf, s.lost)
		s.lost = 0
	}
	s.buf = append(s.buf, rec...)
	if large {
		s.large += len(rec)
	}
	s.mu.Unlock()
	s.signal()
}

// held is the count of large bytes s's side (root's, or other uids')
// holds.
func (s *subscriber) held() *atomic.Int64 {
	if s.all {
		return &s.h.largeHeld[1]
	}
	return &s.h.largeHeld[0]
}

// appendLost appends the stream's record of n records lost.
func appendLost(b []byte, n uint64) []byte {
	return fmt.Appendf(b, `{"kind":"lost","mechanism":"stream","count":%d,"time":"%s"}`+"\n",
		n, time.Now().UTC().Format(time.RFC3339Nano))
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next implements api.Stream.
func (s *subscriber) Next(ctx context.Context) ([]byte, error) {
	for {
		s.mu.Lock()
		if len(s.buf) > 0 || s.lost > 0 {
			out, lost := s.buf, s.lost
			s.held().Add(-int64(s.large))
			s.buf, s.spare, s.lost, s.large = s.spare[:0], nil, 0, 0
			s.mu.Unlock()
			if lost > 0 {
				out = appendLost(out, lost)
			}
			// The publishers get it back at the next take, unless a large
			// record grew it: that memory goes with this read.
			s.spare = out
			if cap(out) > 2*streamBuffer {
				s.spare = make([]byte, 0, streamBuffer)
			}
			return out, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, io.EOF
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close implements api.Stream.
func (s *subscriber) Close() {
	s.h.unsubscribe(s)
	s.mu.Lock()
	s.closed = true
	s.held().Add(-int64(s.large))
	s.large = 0
	s.mu.Unlock()
}
