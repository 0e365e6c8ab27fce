package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/metrics"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Queue bounds.
const (
	memberQueue = 8192
	noteQueue   = 1024
	memberBatch = 256
)

type memberNote struct {
	id  string
	pid int32
	tok token.Token
	par int32
	ptk token.Token
	at  int64
}

type exitNote struct {
	pid    int32
	tok    token.Token
	status uint32
}

type pendingAdmit struct {
	tok   token.Token
	id    string
	since time.Time
}

// Daemon is a running supervisor daemon.
type Daemon struct {
	cfg     Config
	boot    procfs.BootID
	self    int32
	st      *store.Store
	tr      atomic.Pointer[tracker.Tracker]
	judge   *verdict.Judge
	log     *feed
	started time.Time
	cg      cgroupBase

	mu       sync.RWMutex
	holders  map[int32][]string // holder pid -> grants held
	roots    map[int32]string   // root pid -> running claim
	pending  map[int32]pendingAdmit
	children map[int32]string // launched children not yet reaped
	deadline map[string]time.Time
	npending atomic.Int32

	locks sync.Map // claim id -> *sync.Mutex

	// reapMu keeps the child reaper from reaping while a launch reads the
	// new child's token.
	reapMu sync.Mutex

	memberQ chan memberNote
	exitQ   chan exitNote
	checkQ  chan string
	wake    chan struct{}

	membersRecorded atomic.Uint64
	membersDropped  atomic.Uint64

	repMu     sync.Mutex
	reconcile api.Report
}

// Run runs the daemon until ctx ends. ready, when not nil, is called once
// the daemon serves. A second daemon on the same state directory fails with
// ErrAlreadyRunning; a store that cannot be read fails with ErrStore.
func Run(ctx context.Context, cfg Config, ready func(Info)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	st, err := store.Open(filepath.Join(cfg.StateDir, "claims.db"), store.Options{})
	switch {
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("%s: %w (%v)", cfg.StateDir, ErrAlreadyRunning, err)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	defer st.Close()
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	lg, err := logfeed.New(logfeed.Config{
		Schema: cfg.LogSchema, Output: cfg.LogOutput, Boot: boot,
		ProcessEvents: cfg.LogProcessEvents, Version: cfg.Version,
	})
	if err != nil {
		return fmt.Errorf("log feed: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lg.Close(cctx)
		cancel()
	}()
	// SIGHUP reopens a file output (after logrotate moved it).
	lg.ReopenOnSignal(ctx, syscall.SIGHUP)
	d := &Daemon{
		cfg: cfg, boot: boot, self: int32(os.Getpid()), st: st, log: &feed{Logger: lg},
		started:  time.Now(),
		holders:  map[int32][]string{},
		roots:    map[int32]string{},
		pending:  map[int32]pendingAdmit{},
		children: map[int32]string{},
		deadline: map[string]time.Time{},
		memberQ:  make(chan memberNote, memberQueue),
		exitQ:    make(chan exitNote, noteQueue),
		checkQ:   make(chan string, noteQueue),
		wake:     make(chan struct{}, 1),
	}
	return d.run(ctx, ready)
}

func (d *Daemon) run(ctx context.Context, ready func(Info)) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", err)
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	defer signal.Stop(sigchld)

	tctx, tcancel := context.WithCancel(context.Background())
	defer tcancel()
	tr, err := tracker.Start(tctx, tracker.Options{
		Mechanism: d.cfg.Mechanism,
		Boot:      d.boot,
		Graph: lineage.Config{
			MaxExited:    d.cfg.GraphMaxExited,
			MaxExitedAge: time.Duration(d.cfg.GraphMaxExitedAge),
		},
		// A Lost event reaches onEvent like any other, and the log feed
		// writes its events_lost line from it; the resync that follows it
		// needs no line of its own.
		OnEvent: d.onEvent,
	})
	if err != nil {
		return fmt.Errorf("mechanism %s: %w", d.cfg.Mechanism, err)
	}
	defer tr.Close()
	d.tr.Store(tr)
	d.judge = tracker.NewJudge(d.boot, tr)
	if d.cfg.MetricsListen != "" {
		stop, err := d.serveMetrics(tr)
		if err != nil {
			return err
		}
		defer stop()
	}
	d.cg = findCgroupBase(d.cfg.Cgroup)
	d.log.Service(logfeed.Service{Mechanism: tr.Mechanism(), Reason: "started; cgroup: " + d.cg.describe()})

	// Workers: the member writer and the exit recorder. They end when
	// wctx ends, after the server has stopped.
	wctx, wcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.memberWriter(wctx) }()
	go func() { defer wg.Done(); d.exitRecorder(wctx) }()
	defer func() { wcancel(); wg.Wait() }()

	d.reapChildren()
	rep := d.reapAll(ctx, reapOpts{startup: true})
	d.repMu.Lock()
	d.reconcile = rep
	d.repMu.Unlock()
	d.log.Reconcile(logfeed.Reconcile{
		Seen: rep.Seen, Readopted: rep.Readopted, TornDown: rep.TornDown, Foreign: rep.Foreign,
		Unverifiable: rep.Unverifiable, AlreadyGone: rep.AlreadyGone, Failed: rep.Failed,
		Mechanism: string(tr.Mechanism()),
	})

	ln, err := d.listen()
	if err != nil {
		return err
	}
	srv := api.NewServer(d)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if ready != nil {
		ready(Info{Socket: d.cfg.Socket, Mechanism: string(tr.Mechanism()), Reconcile: rep})
	}

	reap := time.NewTicker(time.Duration(d.cfg.ReapInterval))
	defer reap.Stop()
	clock := time.NewTicker(time.Second)
	defer clock.Stop()
	var stopErr error
	reason := "signal"
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tr.Done():
			stopErr = fmt.Errorf("event mechanism stopped: %v", tr.Err())
			reason = stopErr.Error()
			break loop
		case err := <-serveErr:
			stopErr = fmt.Errorf("api server: %w", err)
			reason = stopErr.Error()
			break loop
		case <-sigchld:
			d.reapChildren()
		case id := <-d.checkQ:
			d.reapIDs(ctx, id)
		case <-reap.C:
			d.reapChildren()
			d.reapAll(ctx, reapOpts{})
			d.retain()
			d.expirePending()
		case <-clock.C:
			d.wallClock(ctx)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(sctx)
	cancel()
	os.Remove(d.cfg.Socket)
	d.log.Service(logfeed.Service{Stopping: true, Mechanism: tr.Mechanism(), Reason: reason})
	return stopErr
}

// serveMetrics starts the Prometheus endpoint on the configured address. A
// bad or busy address fails the start; the endpoint stops with stop.
func (d *Daemon) serveMetrics(tr *tracker.Tracker) (stop func(), err error) {
	m := metrics.New(d.cfg.Version, metrics.Options{
		Graph: func() (int, int) {
			s := tr.Graph().Stats()
			return s.Live, s.Exited
		},
		Claims: func(emit func(kind, state string, n int)) {
			st, err := d.st.Stats()
			if err != nil {
				return
			}
			for _, k := range store.Kinds() {
				for _, s := range store.States() {
					emit(string(k), string(s), st.Counts[k][s])
				}
			}
		},
		LogFeed: func() (uint64, uint64) {
			s := d.log.Stats()
			return s.Written, s.Dropped
		},
	})
	ln, err := metrics.Listen(d.cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %q: %w", d.cfg.MetricsListen, err)
	}
	d.log.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.ServeListener(ctx, ln) }()
	return func() { cancel(); <-done }, nil
}

// reapIDs handles a claim id from checkQ and any others queued with it.
func (d *Daemon) reapIDs(ctx context.Context, first string) {
	ids := map[string]bool{first: true}
	for {
		select {
		case id := <-d.checkQ:
			ids[id] = true
			continue
		default:
		}
		break
	}
	for id := range ids {
		c, err := d.st.Get(id)
		if err != nil {
			continue
		}
		d.reapClaim(ctx, &c, reapOpts{})
	}
}

func (d *Daemon) listen() (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(d.cfg.Socket), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	// We hold the state lock; a socket file left there is stale or belongs
	// to a daemon of another state dir, which connect tells apart.
	if fi, err := os.Lstat(d.cfg.Socket); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket %s: exists and is not a socket", d.cfg.Socket)
		}
		if c, err := net.DialTimeout("unix", d.cfg.Socket, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: another daemon serves it: %w", d.cfg.Socket, ErrAlreadyRunning)
		}
		os.Remove(d.cfg.Socket)
	}
	old := syscall.Umask(0o117)
	ln, err := net.Listen("unix", d.cfg.Socket)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", d.cfg.Socket, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(d.cfg.Socket, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket mode: %w", err)
	}
	if g := d.cfg.SocketGroup; g != "" {
		gid, err := strconv.Atoi(g)
		if err != nil {
			grp, lerr := user.LookupGroup(g)
			if lerr != nil {
				ln.Close()
				return nil, fmt.Errorf("socket group %q: %w", g, lerr)
			}
			gid, _ = strconv.Atoi(grp.Gid)
		}
		if err := os.Chown(d.cfg.Socket, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("socket group: %w", err)
		}
	}
	return ln, nil
}

func (d *Daemon) claimLock(id string) *sync.Mutex {
	m, _ := d.locks.LoadOrStore(id, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// index records a running claim's pids for the event path.
func (d *Daemon) index(c *store.Claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.Pid > 0 {
		d.roots[c.Pid] = c.ID
	}
	if c.Holder != nil {
		ids := d.holders[c.Holder.Pid]
		for _, id := range ids {
			if id == c.ID {
				goto deadline
			}
		}
		d.holders[c.Holder.Pid] = append(ids, c.ID)
	}
deadline:
	if !c.Deadline.IsZero() {
		d.deadline[c.ID] = c.Deadline
	}
}

// unindex forgets a claim that is no longer running.
func (d *Daemon) unindex(c *store.Claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.roots[c.Pid] == c.ID {
		delete(d.roots, c.Pid)
	}
	if c.Holder != nil {
		ids := d.holders[c.Holder.Pid]
		out := ids[:0]
		for _, id := range ids {
			if id != c.ID {
				out = append(out, id)
			}
		}
		if len(out) == 0 {
			delete(d.holders, c.Holder.Pid)
		} else {
			d.holders[c.Holder.Pid] = out
		}
	}
	delete(d.deadline, c.ID)
	if p, ok := d.pending[c.Pid]; ok && p.id == c.ID {
		delete(d.pending, c.Pid)
		d.npending.Add(-1)
	}
}

// onEvent runs on the tracker's drain goroutine: map lookups and
// non-blocking sends only.
func (d *Daemon) onEvent(ev *events.Event) {
	d.log.Event(ev)
	tr := d.tr.Load()
	if tr == nil {
		return
	}
	switch ev.Kind {
	case events.Fork:
		if d.npending.Load() > 0 {
			d.admitPending(tr, ev)
		}
		if root, _, ok := tr.Graph().RootOf(ev.Pid, ev.Token); ok {
			select {
			case d.memberQ <- memberNote{id: root, pid: ev.Pid, tok: ev.Token, par: ev.PPid, ptk: ev.ParentToken, at: time.Now().UnixNano()}:
			default:
				d.membersDropped.Add(1)
			}
		}
	case events.Exit:
		d.mu.RLock()
		// The holder's exit makes its grants orphans: the reaper judges
		// the holder and, if it is gone, the grants.
		for _, id := range d.holders[ev.Pid] {
			select {
			case d.checkQ <- id:
			default:
			}
		}
		_, root := d.roots[ev.Pid]
		d.mu.RUnlock()
		if root {
			select {
			case d.exitQ <- exitNote{pid: ev.Pid, tok: ev.Token, status: ev.Status}:
			default:
			}
		}
	}
}

func (d *Daemon) admitPending(tr *tracker.Tracker, ev *events.Event) {
	d.mu.Lock()
	p, ok := d.pending[ev.Pid]
	d.mu.Unlock()
	if !ok {
		return
	}
	if err := tr.Graph().Admit(ev.Pid, p.tok, p.id); err != nil {
		return
	}
	d.mu.Lock()
	if q, ok := d.pending[ev.Pid]; ok && q.id == p.id {
		delete(d.pending, ev.Pid)
		d.npending.Add(-1)
	}
	d.mu.Unlock()
}

// admit makes (pid, tok) a root of claim id in the graph, now or, when the
// graph has not seen the fork yet, on the fork event. It returns the live
// descendants the graph already holds.
func (d *Daemon) admit(id string, pid int32, tok token.Token) {
	tr := d.tr.Load()
	g := tr.Graph()
	if err := g.Admit(pid, tok, id); err == nil {
		d.recordDescendants(id, pid, tok)
		return
	}
	d.mu.Lock()
	if _, ok := d.pending[pid]; !ok {
		d.npending.Add(1)
	}
	d.pending[pid] = pendingAdmit{tok: tok, id: id, since: time.Now()}
	d.mu.Unlock()
	// The fork may have been applied between the failed Admit and the
	// pending entry: try once more.
	if err := g.Admit(pid, tok, id); err == nil {
		d.mu.Lock()
		if q, ok := d.pending[pid]; ok && q.id == id {
			delete(d.pending, pid)
			d.npending.Add(-1)
		}
		d.mu.Unlock()
		d.recordDescendants(id, pid, tok)
	}
}

func (d *Daemon) recordDescendants(id string, pid int32, tok token.Token) {
	nodes, err := d.tr.Load().Graph().Descendants(pid, tok)
	if err != nil {
		return
	}
	for _, n := range nodes {
		select {
		case d.memberQ <- memberNote{id: id, pid: n.Pid, tok: n.Token, par: n.PPid, ptk: n.ParentToken, at: time.Now().UnixNano()}:
		default:
			d.membersDropped.Add(1)
		}
	}
}

func (d *Daemon) expirePending() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, p := range d.pending {
		if time.Since(p.since) > time.Minute {
			delete(d.pending, pid)
			d.npending.Add(-1)
		}
	}
}

// memberWriter records members in batches. Each is bound and judged first:
// a member recorded with the pidfd's token (pidfs inode included) can be
// verified by its token alone after a restart.
func (d *Daemon) memberWriter(ctx context.Context) {
	batch := map[string][]store.Member{}
	for {
		var n memberNote
		select {
		case <-ctx.Done():
			// Drain what is queued so a clean shutdown loses nothing.
			for {
				select {
				case n = <-d.memberQ:
					d.addNote(batch, n)
					continue
				default:
				}
				break
			}
			d.flushMembers(batch)
			return
		case n = <-d.memberQ:
		}
		d.addNote(batch, n)
	more:
		for i := 0; i < memberBatch; i++ {
			select {
			case n = <-d.memberQ:
				d.addNote(batch, n)
			default:
				break more
			}
		}
		d.flushMembers(batch)
	}
}

func (d *Daemon) addNote(batch map[string][]store.Member, n memberNote) {
	claim := n.tok.String()
	if n.tok.IsZero() {
		d.membersDropped.Add(1)
		return
	}
	v, h := d.judge.Bind(n.pid, claim)
	if h == nil {
		// Gone already (a short-lived member, the middle of a double
		// fork): nothing to find again after a restart.
		if v.Result != verdict.Gone {
			d.membersDropped.Add(1)
		}
		return
	}
	tok := h.Token()
	h.Close()
	m := store.Member{Pid: n.pid, Token: tok.String(), Parent: n.par, BornAt: time.Unix(0, n.at)}
	if !n.ptk.IsZero() {
		m.ParentToken = n.ptk.String()
	}
	batch[n.id] = append(batch[n.id], m)
}

func (d *Daemon) flushMembers(batch map[string][]store.Member) {
	for id, ms := range batch {
		added, err := d.st.AddMember(id, ms...)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				d.membersDropped.Add(uint64(len(ms)))
			}
		} else {
			d.membersRecorded.Add(uint64(added))
		}
		delete(batch, id)
	}
}

// exitRecorder records exit codes of jobs that are not the daemon's
// children, from exit events.
func (d *Daemon) exitRecorder(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-d.exitQ:
			d.recordEventExit(n)
		}
	}
}

func (d *Daemon) recordEventExit(n exitNote) {
	d.mu.RLock()
	id, ok := d.roots[n.pid]
	_, child := d.children[n.pid]
	d.mu.RUnlock()
	if !ok {
		return
	}
	if child {
		// The wait4 reaper records it, from the kernel's own status.
		return
	}
	l := d.claimLock(id)
	l.Lock()
	defer l.Unlock()
	c, err := d.st.Get(id)
	if err != nil || c.State != store.Running {
		return
	}
	ctok, err := token.Parse(c.Token)
	if err != nil {
		return
	}
	status, known := n.status, false
	if !n.tok.IsZero() {
		m, _ := token.Compare(ctok, n.tok)
		known = m == token.Same || (m == token.Unproven && ctok.Start == n.tok.Start)
	}
	if !known {
		// The event lacked a token: ask the graph which generation
		// exited.
		node, m, ok := d.tr.Load().Graph().Find(n.pid, ctok)
		if ok && (m == token.Same || m == token.Unproven) && node.Flags.Has(lineage.ExitObserved) {
			status, known = node.ExitStatus, true
		}
	}
	if !known {
		return
	}
	if c.Kind == store.Grant {
		select {
		case d.checkQ <- c.ID:
		default:
		}
		return
	}
	d.finishJob(&c, syscall.WaitStatus(status), true)
}

// finishJob records a job's end. Caller holds the claim lock.
func (d *Daemon) finishJob(c *store.Claim, ws syscall.WaitStatus, known bool) {
	now := time.Now()
	err := d.st.Update(c.ID, func(x *store.Claim) error {
		if x.State != store.Running {
			return errNoChange
		}
		x.State = store.Exited
		x.EndedAt = now
		if known {
			switch {
			case ws.Exited():
				code := ws.ExitStatus()
				x.ExitCode = &code
			case ws.Signaled():
				x.ExitSignal = int(ws.Signal())
			}
		}
		x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: "exited", Mechanism: d.judge.Mechanism, At: now}
		return nil
	})
	if err == nil {
		d.unindex(c)
		removeCgroup(c.Cgroup)
	}
}

var errNoChange = errors.New("no change")

// reapChildren reaps the daemon's exited children: launched roots and
// processes reparented to it as subreaper.
func (d *Daemon) reapChildren() {
	type reaped struct {
		pid int32
		id  string
		ws  syscall.WaitStatus
	}
	var done []reaped
	d.reapMu.Lock()
	for _, pid := range d.childPids() {
		d.mu.RLock()
		id, launched := d.children[pid]
		d.mu.RUnlock()
		if !launched && !d.adopted(pid) {
			continue
		}
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(int(pid), &ws, syscall.WNOHANG, nil)
		if err != nil || got != int(pid) {
			continue
		}
		if launched {
			d.mu.Lock()
			delete(d.children, pid)
			d.mu.Unlock()
			done = append(done, reaped{pid, id, ws})
		}
	}
	d.reapMu.Unlock()
	for _, r := range done {
		l := d.claimLock(r.id)
		l.Lock()
		c, err := d.st.Get(r.id)
		if err == nil && c.State == store.Running && c.Pid == r.pid {
			if c.Kind == store.Job {
				d.finishJob(&c, r.ws, true)
			} else {
				select {
				case d.checkQ <- c.ID:
				default:
				}
			}
		}
		l.Unlock()
	}
}

// adopted reports whether a zombie child of the daemon is one it may reap:
// anything the daemon did not fork itself (a process reparented to it as
// subreaper). Processes the daemon forked for other reasons (a ps poller)
// are left to their own Wait.
func (d *Daemon) adopted(pid int32) bool {
	tr := d.tr.Load()
	if tr == nil {
		return true
	}
	var st procfs.Stat
	r := procfs.Reader{Root: "/proc"}
	if err := r.ReadStat(pid, &st); err != nil || !st.Zombie() {
		return false
	}
	tok := token.Token{Boot: d.boot, Start: st.StartTime, Prec: token.Ticks}
	n, _, ok := tr.Graph().Find(pid, tok)
	if !ok {
		return true // a child the graph never saw being forked
	}
	return n.PPid != d.self
}

// childPids lists the daemon's children (zombies included) from
// /proc/self/task/*/children.
func (d *Daemon) childPids() []int32 {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int32
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		start := -1
		for i := 0; i <= len(b); i++ {
			if i < len(b) && b[i] >= '0' && b[i] <= '9' {
				if start < 0 {
					start = i
				}
				continue
			}
			if start >= 0 {
				if v, err := strconv.Atoi(string(b[start:i])); err == nil {
					out = append(out, int32(v))
				}
				start = -1
			}
		}
	}
	return out
}
