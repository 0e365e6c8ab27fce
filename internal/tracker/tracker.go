// Package tracker keeps a lineage graph fed from one event mechanism. It
// picks the mechanism (auto tries eBPF, then the netlink proc connector,
// then polling), attaches it, scans /proc, seeds the graph and then drains
// events into it on one goroutine, in that order, so a process born between
// attach and scan is neither missed nor counted twice. After a loss it
// resyncs the graph from /proc, and the graph marks every claim whose watch
// crossed the gap.
//
// The Tracker is also the verdict package's Observer (what the graph saw of
// a claim) and the actions package's Finder (members by observed lineage).
package tracker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/events/proccon"
	"github.com/procsupervisor/supervisor/internal/execcache"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/procctx"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
)

// ErrUnknownMechanism reports a --mechanism value that names nothing.
var ErrUnknownMechanism = errors.New("unknown mechanism")

// Mechanisms lists the values Options.Mechanism accepts.
var Mechanisms = []string{"auto", "ebpf", "netlink", "proc", "ps"}

// Options configure a Tracker.
type Options struct {
	// Mechanism is auto, ebpf, netlink, proc or ps ("" means auto).
	Mechanism string
	Boot      procfs.BootID
	// ProcRoot is the proc file system to scan ("/proc" when empty).
	ProcRoot string
	Graph    lineage.Config
	// ArgvMax bounds the argument bytes of an eBPF exec event (0: the
	// source's default, tracepoint.DefaultArgvMax).
	ArgvMax int
	// ExecContext, when set and true at the event, fills the exec context
	// of events whose mechanism captured none (netlink, polling) from
	// /proc (internal/procctx): exec events, and the forks a poller infers
	// (the process as it runs when first seen; none for one that started
	// in the tick its snapshot began or later: see provable). A process already gone, or
	// an event without a token in clock ticks (none, or the ps fallback's
	// in seconds, which cannot tell two instances of one second apart),
	// carries none: absent, never invented.
	// With eBPF, whose exec program captures the executable, directory,
	// cgroup and arguments itself, it decides whether the program does:
	// read at Start and at each ExecContextChanged, and exec events of a
	// time it was false carry none of them (the context still).
	ExecContext func() bool
	// OnEvent, when set, sees every event after the graph applied it, on
	// the drain goroutine. It must not keep ev.
	OnEvent func(ev *events.Event)
	// Execs, when set, is the exec cache that gives OnEvent's events
	// their Parent (see describe). Only the drain goroutine uses it.
	Execs *execcache.Cache
	// Redact, when set, rewrites the arguments of exec events before
	// OnEvent and the exec cache see them.
	Redact *redact.Rules
	// OnResync, when set, is told of each resync after a loss.
	OnResync func(mech events.Mechanism, lost uint64, err error)

	// afterAttach runs between attaching the source and scanning (tests).
	afterAttach func()
}

// Tracker feeds a lineage graph from an event source.
type Tracker struct {
	src      events.Source
	graph    *lineage.Graph
	boot     procfs.BootID
	root     string
	opts     Options
	tried    []string // mechanisms auto tried and why they could not run
	done     chan struct{}
	err      error // drain error, valid after done
	resyncs  atomic.Uint64
	closeOne sync.Once
	named    events.Desc     // the name-only parent describe lends an event
	ctxr     *procctx.Reader // nil unless Options.ExecContext
	// blobs is the source's switch of its exec capture (eBPF), nil when it
	// has none or Options.ExecContext is nil; blobsMu makes each
	// ExecContextChanged read Options.ExecContext and set the switch as
	// one step, so that the last call leaves the switch as the last
	// answer says.
	blobs   execBlobSwitch
	blobsMu sync.Mutex
	// follows, snaps and barrier are src as a follower, a snapshotTicker
	// and a barrier, nil when it is not one (setSource).
	follows follower
	snaps   snapshotTicker
	barrier barrier
}

// setSource makes src the tracker's source, with the optional interfaces
// the event path asks of it looked up once.
func (t *Tracker) setSource(src events.Source) {
	t.src = src
	t.follows, _ = src.(follower)
	t.snaps, _ = src.(snapshotTicker)
	t.barrier, _ = src.(barrier)
}

// follower is a source that can tell, after /proc was read for an exec
// event, what the process did since the event that /proc then showed
// instead of what it was at the exec (proccon.Source.Follows).
type follower interface {
	Follows(pid int32) proccon.Follow
}

// execBlobSwitch is a source whose exec events carry what its program
// captured (paths and arguments) only while asked to
// (tracepoint.Source.SetExecBlobs).
type execBlobSwitch interface {
	SetExecBlobs(on bool)
}

// Start opens the mechanism, seeds the graph and starts draining. The
// tracker runs until Close or until ctx ends.
func Start(ctx context.Context, opts Options) (*Tracker, error) {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Graph.Boot == (procfs.BootID{}) {
		opts.Graph.Boot = opts.Boot
	}
	src, tried, err := open(ctx, opts.Mechanism, opts.Boot, opts.ArgvMax)
	if err != nil {
		return nil, err
	}
	t := &Tracker{
		graph: lineage.New(opts.Graph), boot: opts.Boot,
		root: opts.ProcRoot, opts: opts, tried: tried, done: make(chan struct{}),
	}
	t.setSource(src)
	if opts.ExecContext != nil {
		t.ctxr = procctx.New(opts.ProcRoot, opts.ArgvMax)
		if b, ok := src.(execBlobSwitch); ok {
			t.blobs = b
			t.ExecContextChanged()
		}
	}
	if opts.afterAttach != nil {
		opts.afterAttach()
	}
	procs, err := events.Scan(opts.ProcRoot, opts.Boot)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("scan %s: %w", opts.ProcRoot, err)
	}
	t.graph.Seed(procs)
	go t.drain()
	go func() {
		select {
		case <-ctx.Done():
			t.Close()
		case <-t.done:
		}
	}()
	return t, nil
}

func (t *Tracker) drain() {
	defer close(t.done)
	var ev events.Event
	for {
		if err := t.src.Read(&ev); err != nil {
			if !errors.Is(err, events.ErrClosed) {
				t.err = err
			}
			return
		}
		t.enrich(&ev)
		t.context(&ev)
		t.graph.Apply(&ev)
		if ev.Kind == events.Lost {
			t.resync(ev.Count)
		}
		if t.opts.OnEvent != nil {
			t.describe(&ev)
			t.opts.OnEvent(&ev)
		}
	}
}

// context fills ev's context from /proc when it is wanted and can be had.
func (t *Tracker) context(ev *events.Event) {
	if t.ctxr != nil && wantsContext(ev) && t.provable(ev) && t.opts.ExecContext() {
		t.fill(ev)
	}
}

// fill reads ev's context from /proc. A process gone meanwhile gets none.
// What the source saw the process change since the exec is absent: all of
// it, the name too, when it exec'd again (what /proc showed is the later
// program: its own exec event will carry it) or when the source could not
// see whether it did (netlink's look-ahead did not reach the end of the
// queue); the Context's ids when it changed them, its session, group and
// terminal when it started a session (events.Context.Drop: the cgroup, pid
// namespace and audit ids stay); the name (which the source read as it
// bound the event) when it renamed itself or is inside another exec, even
// when the process is gone by the read. What no source reports (a chdir, arguments rewritten in memory,
// setgroups or setpgid alone, a cgroup move) is as /proc showed it at the
// read (see procctx).
func (t *Tracker) fill(ev *events.Event) {
	err := t.ctxr.Fill(ev) // on an error (gone) ev is left as it was
	if t.follows == nil || ev.Kind != events.Exec {
		return
	}
	changed := t.follows.Follows(ev.Pid)
	if changed&(proccon.FollowComm|proccon.FollowExec|proccon.FollowUnknown) != 0 || errors.Is(err, procctx.ErrInExec) {
		// The source read the name as it bound the event, which may be
		// after the process went on (inside its next exec, the new name
		// comes first), whether or not it is still there. Said so in the
		// context, when there is one: a line without a name said
		// nothing of why.
		ev.Comm = [16]byte{}
		ev.Ctx.Drop(events.CtxName)
	}
	if err != nil {
		return
	}
	if changed&(proccon.FollowExec|proccon.FollowUnknown) != 0 {
		ev.Exe, ev.Argv, ev.Exec, ev.Ctx = "", nil, events.ExecInfo{}, events.Context{}
	}
	if changed&proccon.FollowIDs != 0 {
		ev.Ctx.Drop(events.CtxIDs)
	}
	if changed&proccon.FollowSession != 0 {
		ev.Ctx.Drop(events.CtxSession)
	}
}

// ExecContextChanged tells the tracker that Options.ExecContext may answer
// otherwise now (a consumer of exec context came or went). With eBPF the
// exec program captures paths and arguments from the next exec on while
// the answer is true, and skips them while it is false; netlink and polling
// read Options.ExecContext at each event and need no telling. Safe to call
// from any goroutine.
func (t *Tracker) ExecContextChanged() {
	if t.blobs == nil {
		return
	}
	t.blobsMu.Lock()
	defer t.blobsMu.Unlock()
	t.blobs.SetExecBlobs(t.opts.ExecContext())
}

// snapshotTicker is a polling source that tells when the snapshot behind
// its current events began (fallback.Poller.SnapshotTick).
type snapshotTicker interface {
	SnapshotTick() uint64
}

// provable reports whether /proc can be read for ev's instance: a token
// in ticks without the pidfs inode (a poller's) names one instance only
// when it started before the snapshot that saw it began; one that started
// later may have exited and left its pid, within its tick, to another
// that the token cannot tell apart.
func (t *Tracker) provable(ev *events.Event) bool {
	return t.snaps == nil || !ev.Inferred || ev.Token.Ino != 0 || ev.Token.Start < t.snaps.SnapshotTick()
}

// wantsContext reports whether ev is one whose exec context /proc can
// give: an exec, or a poller's inferred fork, of a known instance, that
// its mechanism did not describe.
func wantsContext(ev *events.Event) bool {
	return !ev.Ctx.Valid && !ev.Token.IsZero() && (ev.Kind == events.Exec || ev.Kind == events.Fork && ev.Inferred)
}

// enrich fills in what the mechanism could not see but the graph knows:
// the parent's token on a fork or an exec, and the token and comm of an exiting
// process (the netlink connector sends neither). An exit is attributed only
// when the live instance at the pid started before the exit happened.
func (t *Tracker) enrich(ev *events.Event) {
	switch ev.Kind {
	case events.Fork, events.Exec:
		if ev.Kind == events.Exec && ev.Mechanism == events.Netlink {
			t.execParent(ev)
		}
		// The instance the graph holds live at the parent pid, every
		// earlier event applied: the parent at the event.
		if ev.ParentToken.IsZero() && ev.PPid > 0 {
			if p, ok := t.graph.Live(ev.PPid); ok {
				ev.ParentToken = p.Token
			}
		}
	case events.Exit:
		if !ev.Token.IsZero() {
			return
		}
		n, ok := t.graph.Live(ev.Pid)
		if !ok || (ev.Time != 0 && n.BootStart != 0 && uint64(n.BootStart) > ev.Time) {
			return
		}
		ev.Token = n.Token
		if ev.Comm == ([16]byte{}) {
			ev.Comm = n.Comm
		}
		if ev.PPid == 0 {
			ev.PPid = n.PPid
		}
		if ev.ParentToken.IsZero() {
			ev.ParentToken = n.ParentToken
		}
	}
}

// execParent gives a netlink exec the parent its process had at the exec.
// The source reads the parent from /proc when it binds the event, later: a
// process whose parent exited in between shows its adopter (init, a
// subreaper), which was not its parent when it exec'd. The graph, every
// earlier event applied, knows better while it holds the process's parent
// instance live: that parent's exit, not applied yet, came after the exec,
// and the kernel sends an exit before it hands the children over. A parent
// the graph cannot name by its token leaves the source's reading.
func (t *Tracker) execParent(ev *events.Event) {
	n, m, ok := t.graph.Find(ev.Pid, ev.Token)
	if !ok || m != token.Same || !n.Live() || n.PPid <= 0 || n.ParentToken.IsZero() {
		return
	}
	p, ok := t.graph.Live(n.PPid)
	if !ok || p.Token != n.ParentToken {
		return
	}
	ev.PPid, ev.ParentToken = n.PPid, p.Token
}

// resync rescans /proc after a loss. Polling sources resync by their nature:
// their next snapshot is the truth, so the scan is for the kernel sources.
func (t *Tracker) resync(lost uint64) {
	t.resyncs.Add(1)
	procs, err := events.Scan(t.root, t.boot)
	if err == nil {
		t.graph.Resync(procs)
	}
	if t.opts.OnResync != nil {
		t.opts.OnResync(t.src.Mechanism(), lost, err)
	}
}

// Graph returns the graph the tracker feeds.
func (t *Tracker) Graph() *lineage.Graph { return t.graph }

// Mechanism names the running mechanism.
func (t *Tracker) Mechanism() events.Mechanism { return t.src.Mechanism() }

// Tried lists the mechanisms auto tried before the one running, each with
// the reason it could not run.
func (t *Tracker) Tried() []string { return t.tried }

// Stats returns the source's counters.
func (t *Tracker) Stats() events.Stats { return t.src.Stats() }

// kernelLoser is a source whose kernel counts the records it dropped
// ahead of what Read has reported (tracepoint.Source.KernelLost).
type kernelLoser interface {
	KernelLost() (uint64, bool)
}

// Losses returns a count that grows with every event the source has lost
// up to now, reported yet or not: the kernel's own count where the source
// has one that runs ahead of its Lost events (eBPF), else the losses
// reported (netlink reports each before the marker Sync waits for). Two
// equal answers around a Sync say nothing was lost between them. ok is
// false when the count cannot be read (the source closed).
func (t *Tracker) Losses() (uint64, bool) {
	if k, isK := t.src.(kernelLoser); isK {
		return k.KernelLost()
	}
	return t.src.Stats().Lost, true
}

// Polls returns the poll counters of a polling mechanism; ok is false for
// the kernel sources, which do not poll.
func (t *Tracker) Polls() (st fallback.PollStats, ok bool) {
	if p, isPoller := t.src.(*fallback.Poller); isPoller {
		return p.Polls(), true
	}
	return st, false
}

// Resyncs counts resyncs after losses.
func (t *Tracker) Resyncs() uint64 { return t.resyncs.Load() }

// Done is closed when draining stops.
func (t *Tracker) Done() <-chan struct{} { return t.done }

// Err returns why draining stopped, nil after a clean Close.
func (t *Tracker) Err() error {
	<-t.done
	return t.err
}

// Close stops the source and waits for the drain goroutine to end. The
// source is closed first, so its blocked Read returns ErrClosed.
func (t *Tracker) Close() error {
	var err error
	t.closeOne.Do(func() { err = t.src.Close() })
	<-t.done
	return err
}
