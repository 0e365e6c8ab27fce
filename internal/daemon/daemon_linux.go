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
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events/tracepoint"
	"github.com/procsupervisor/supervisor/internal/execcache"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/metrics"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/userns"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// softMemoryLimit is the collector's target ceiling (runtime/debug).
const softMemoryLimit = 40 << 20

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

// check asks the executor to settle a claim from the main loop.
type check struct {
	id      string
	trigger Trigger
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

// claimStore is the store as the daemon uses it (*store.Store).
type claimStore interface {
	Get(id string) (store.Claim, error)
	Put(c *store.Claim) error
	Update(id string, f func(*store.Claim) error) error
	List(f store.Filter) ([]store.Claim, error)
	Delete(id string) error
	AddMember(id string, ms ...store.Member) (int, error)
	RemoveMember(id string, ms ...store.Instance) (int, error)
	Stats() (store.Stats, error)
	Usage() (inUse, limit int64, err error)
}

// judge is the verdict judge as the daemon uses it (*verdict.Judge, made
// by tracker.NewJudge).
type judge interface {
	Judge(pid int32, claim token.Token) verdict.Verdict
	Bind(pid int32, claim token.Token) (verdict.Verdict, *pidfd.Handle)
}

// Daemon is a running supervisor daemon.
type Daemon struct {
	cfg   Config
	boot  procfs.BootID
	self  int32
	st    claimStore
	tr    atomic.Pointer[tracker.Tracker]
	judge judge
	hw    *holderWatch // nil until run starts it
	// exits is where teardowns wait for their members' exits, in one
	// thread for all (nil until run starts it: each polls on its own).
	exits   *actions.ExitWaiter
	work    *workers
	fds     *fdBudget  // the pidfds teardowns for uids but root may hold
	quotaMu sync.Mutex // a quota's check and the claim's record, one step (record)
	claims  *claimIndex
	log     *feed
	redact  *redact.Rules // redact_args, set before the API serves
	started time.Time
	cg      cgroupBase

	mu       sync.RWMutex
	holders  map[int32][]held // holder pid -> grants held
	roots    map[int32]string // root pid -> running claim
	pending  map[int32]pendingAdmit
	children map[int32]string // launched children not yet reaped
	// starting holds launches from their spawn until they return; a
	// non-nil exit is the root's, reaped meanwhile, which the launch
	// hands on once the claim knows its pid and the exec is done.
	starting map[string]*earlyExit
	// execDone, when a test sets it, runs in Launch between the exec and
	// the hand-over of a status reaped meanwhile.
	execDone func(id string, pid int32)
	// execEnded, when a test sets it, runs in Launch once the spawn says
	// the exec is done, before the launch looks whether it was.
	execEnded func(pid int32)
	// treeNodes and treeArgs bound a tree answer (api.MaxTreeNodes and
	// api.MaxTreeArgs; tests set less).
	treeNodes, treeArgsMax int
	deadline               map[string]time.Time
	// unwritten holds the exit status of a job whose finishing write
	// failed, for the next pass to write.
	unwritten map[string]syscall.WaitStatus
	// leftovers are the jobs whose root has exited and whose cgroup held
	// processes (leftovers_linux.go), under leftMu; leftoverWake tells
	// its watcher.
	leftMu       sync.Mutex
	leftovers    map[string]*leftover
	leftoverWake chan struct{}
	npending     atomic.Int32
	// tearing holds the ids of the claims whose teardown runs now (claim
	// id -> struct{}): a job's root that exits meanwhile has its exit
	// recorded, and the teardown, not the exit, ends the claim
	// (finishJob).
	tearing sync.Map

	locks sync.Map // claim id -> *sync.Mutex

	// reapMu keeps the child reaper from reaping while a launch reads the
	// new child's token.
	reapMu sync.Mutex

	memberQ chan memberNote
	// pruned is when pruneMembers last looked at each claim; the member
	// writer's alone.
	pruned map[string]time.Time
	// cgGone holds the finished claims whose cgroup is removed
	// (removeFinalCgroups), under cgMu.
	cgMu   sync.Mutex
	cgGone map[string]bool
	exitQ  chan exitNote
	checkQ chan check

	membersRecorded atomic.Uint64
	membersDropped  atomic.Uint64
	storeErrors     atomic.Uint64
	lastStoreErr    atomic.Pointer[string]

	// now is the clock (time.Now; tests may substitute one).
	now func() time.Time

	repMu     sync.Mutex
	reconcile api.Report
	// reconcileOf is the start-up report of the claims that count against
	// each uid's quotas: what Status shows a caller other than root.
	reconcileOf map[uint32]*api.Report
}

// Run runs the daemon until ctx ends. ready, when not nil, is called once
// the daemon serves. A second daemon on the same state directory fails with
// ErrAlreadyRunning; a store that cannot be read fails with ErrStore.
func Run(ctx context.Context, cfg Config, ready func(Info)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.CheckHost(); err != nil {
		return err
	}
	// A soft memory limit (unless GOMEMLIMIT sets one) has the collector
	// return garbage before the heap grows into it: a daemon that lives
	// for months should not keep the peak of a burst of launches.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(softMemoryLimit)
	}
	SetGCPercent()
	// Descriptors this process inherited open across exec would leak into
	// every child it starts: close them at exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	if err := prepareStateDir(cfg.StateDir, os.Geteuid()); err != nil {
		return err
	}
	if err := checkLogDir(cfg.LogOutput, os.Geteuid()); err != nil {
		return err
	}
	if err := checkMetricsDir(cfg.MetricsListen, os.Geteuid()); err != nil {
		return err
	}
	// Claims stored before a redaction pattern are rewritten, and the
	// file compacted, before anything reads them (redactClaim).
	// A missing store with job output beside it was moved or deleted: an
	// empty one would leave every process it held unmanaged.
	opts := store.Options{Evidence: []string{filepath.Join(cfg.StateDir, "jobs")}}
	if rules, _ := redact.Parse(cfg.RedactArgs); !rules.Empty() {
		opts.Rewrite = func(c *store.Claim) bool { return redactClaim(rules, c, false) }
	}
	st, err := store.Open(filepath.Join(cfg.StateDir, "claims.db"), opts)
	switch {
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("%s: %w (%v)", cfg.StateDir, ErrAlreadyRunning, err)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	defer st.Close()
	// Before anything acts on a claim: a socket no client could trust is a
	// reason not to start.
	if err := prepareSocketDir(cfg.Socket, os.Geteuid()); err != nil {
		return err
	}
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	// In a time namespace whose boot-time offset is not whole ticks no
	// start time can be read exactly: every claim would be UNVERIFIABLE.
	if err := procfs.CheckTimeNamespace(); err != nil {
		return err
	}
	// A process line writes the arguments the capture gave, up to its
	// bound: the line cuts nothing the event holds whole.
	argsBytes := cfg.ArgvMax
	if argsBytes == 0 {
		argsBytes = tracepoint.DefaultArgvMax
	}
	lg, err := logfeed.New(logfeed.Config{
		Schema: cfg.LogSchema, Output: cfg.LogOutput, Boot: boot,
		ProcessEvents: cfg.LogProcessEvents, Version: cfg.Version,
		ArgsBytes: argsBytes, UserBytes: cfg.LogUserBytes, ShareOf: userns.SubordinateOf,
		OnSinkState: func(err error) {
			if err != nil {
				fmt.Fprintf(os.Stderr, "supervisor: log feed: %v: lines are dropped, and counted (status: log_lines_dropped), until it takes them again\n", err)
			} else {
				fmt.Fprintln(os.Stderr, "supervisor: log feed: writing again; what was dropped is in a log_lines_dropped line")
			}
		},
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
	d := newDaemon(cfg, boot, st, &feed{Logger: lg}, time.Now)
	return d.run(ctx, ready)
}

// newDaemon wires a daemon to its dependencies: the store, the log feed
// and the clock. run starts the tracker and sets the judge (SetTracker);
// tests give both their own.
func newDaemon(cfg Config, boot procfs.BootID, st claimStore, log *feed, now func() time.Time) *Daemon {
	claims := newClaimIndex()
	return &Daemon{
		cfg: cfg, boot: boot, self: int32(os.Getpid()), log: log,
		st:           memberQuota{claimStore: st, x: claims, quota: cfg.QuotaBytes},
		started:      now(),
		holders:      map[int32][]held{},
		roots:        map[int32]string{},
		pending:      map[int32]pendingAdmit{},
		children:     map[int32]string{},
		starting:     map[string]*earlyExit{},
		deadline:     map[string]time.Time{},
		unwritten:    map[string]syscall.WaitStatus{},
		leftovers:    map[string]*leftover{},
		leftoverWake: make(chan struct{}, 1),
		memberQ:      make(chan memberNote, memberQueue),
		pruned:       map[string]time.Time{},
		exitQ:        make(chan exitNote, noteQueue),
		checkQ:       make(chan check, noteQueue),
		now:          now,
		work:         newWorkers(),
		fds:          newMemberFDs(fdLimit()),
		claims:       claims,
	}
}

// setTracker makes tr the daemon's event source, and the judge built on
// it (tracker.NewJudge: the same judge the CLI builds) its only judge.
func (d *Daemon) setTracker(tr *tracker.Tracker) {
	d.tr.Store(tr)
	d.judge = tracker.NewJudge(d.boot, tr)
}

func (d *Daemon) run(ctx context.Context, ready func(Info)) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", err)
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	defer signal.Stop(sigchld)

	rules, err := redact.Parse(d.cfg.RedactArgs)
	if err != nil {
		return fmt.Errorf("redact_args: %v: %w", err, ErrConfig)
	}
	d.redact = rules
	if d.cfg.MetricsListen != "" {
		// Before the tracker starts: its goroutine counts every event
		// in d.log.m, which is not written again.
		d.log.m = d.newMetrics()
	}
	tctx, tcancel := context.WithCancel(context.Background())
	defer tcancel()
	tr, err := tracker.Start(tctx, tracker.Options{
		Mechanism: d.cfg.Mechanism,
		Boot:      d.boot,
		ArgvMax:   d.cfg.ArgvMax,
		Graph: lineage.Config{
			MaxExited:    d.cfg.GraphMaxExited,
			MaxExitedAge: time.Duration(d.cfg.GraphMaxExitedAge),
		},
		// A Lost event reaches onEvent like any other, and the log feed
		// writes its events_lost line from it; the resync that follows it
		// needs no line of its own.
		OnEvent: d.onEventStream,
		// netlink and polling read the exec context from /proc, and
		// eBPF's exec program captures paths and arguments, only while
		// something shows them: exec lines in the log feed, fork lines
		// (a poller's inferred fork carries it), or a subscriber to the
		// event stream. An exit-only feed needs none.
		ExecContext: func() bool { return wantsExecContext(d.cfg.LogProcessEvents) || d.log.hub.streaming() },
		// The log feed and the stream name each event's parent.
		Execs:  execcache.New(execcache.Config{}),
		Redact: rules,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMechanism, err)
	}
	defer tr.Close()
	d.setTracker(tr)
	// Subscribers coming and going switch eBPF's exec capture; the call
	// after the store covers one that came before it.
	changed := tr.ExecContextChanged
	d.log.hub.changed.Store(&changed)
	defer d.log.hub.changed.Store(nil)
	tr.ExecContextChanged()
	hw, err := newHolderWatch(d.boot, newHolderFDs(fdLimit()), d.holderExited)
	if err != nil {
		return fmt.Errorf("holder watch: %w", err)
	}
	d.hw = hw
	hwDone := make(chan struct{})
	go func() { defer close(hwDone); hw.run() }()
	defer func() { hw.stop(); <-hwDone; hw.close() }()
	exits, err := actions.NewExitWaiter()
	if err != nil {
		return err
	}
	d.exits = exits
	defer exits.Close()
	d.cg = findCgroupBase(d.cfg.Cgroup)
	why := "started; cgroup: " + d.cg.describe()
	if euid := os.Geteuid(); euid != 0 && d.cfg.SocketGroup != "" {
		why += fmt.Sprintf("; socket group %s given, but the daemon runs as uid %d: requests of any other uid are refused", d.cfg.SocketGroup, euid)
	}
	d.log.Service(logfeed.Service{Mechanism: tr.Mechanism(), Reason: why})

	// Workers: the member writer and the exit recorder. They end when
	// wctx ends, after the server has stopped.
	wctx, wcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); d.memberWriter(wctx) }()
	go func() { defer wg.Done(); d.exitRecorder(wctx) }()
	go func() { defer wg.Done(); d.leftoverWatcher(wctx) }()
	defer func() { wcancel(); wg.Wait() }()
	d.boundJobOutputs(wctx)

	d.waitChildren()
	if err := d.loadIndex(); err != nil {
		return err
	}
	// After the index is loaded: the claim gauges are counted from it.
	if d.cfg.MetricsListen != "" {
		stop, err := d.serveMetrics(d.log.m)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep := d.reconcileStart(ctx)
	d.log.Reconcile(logfeed.Reconcile{
		Seen: rep.Seen, Readopted: rep.Readopted, TornDown: rep.TornDown, Foreign: rep.Foreign,
		Unverifiable: rep.Unverifiable, AlreadyGone: rep.AlreadyGone, Failed: rep.Failed,
		Mechanism: string(tr.Mechanism()),
	})

	ln, err := d.listen()
	if err != nil {
		return err
	}
	// Start-up's garbage (the kernel's BTF parsed to load the programs,
	// the /proc scan) goes back to the system now, not when the collector
	// next runs at GCPercent: the daemon settles at its idle size.
	debug.FreeOSMemory()
	opts := []api.Option{api.WithLimits(d.cfg.APILimits())}
	if d.cfg.SandboxedCallers == "refuse" {
		opts = append(opts, api.WithRefuseConfinable())
	}
	srv := api.NewServer(d, d.log.Internal, opts...)
	serveErr := make(chan error, 1)
	var more []net.Listener
	if priv := d.listenPrivate(); priv != nil {
		more = append(more, priv)
	}
	go func() { serveErr <- srv.Serve(ln, more...) }()
	if ready != nil {
		ready(Info{Socket: d.cfg.Socket, Mechanism: string(tr.Mechanism()), Reconcile: rep})
	}

	reap := time.NewTicker(time.Duration(d.cfg.ReapInterval))
	defer reap.Stop()
	clock := time.NewTicker(time.Second)
	defer clock.Stop()
	var mem memWatch
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
			d.waitChildren()
		case c := <-d.checkQ:
			d.settleQueued(ctx, c)
		case <-reap.C:
			d.waitChildren()
			d.reconcileAll(ctx, request{trigger: Pass, async: true})
			d.retain()
			d.expirePending()
			tr.Graph().Expire() // on a quiet host no event expires old exits
		case <-clock.C:
			d.wallClock(ctx)
			if mem.tick(tr.Stats().Events) {
				debug.FreeOSMemory() // a storm is over: see memWatch
			}
		}
	}
	// Teardowns in progress send nothing more (their claims stay
	// releasing, resumed by the next start), then requests end.
	d.work.stop()
	d.log.hub.close() // event streams end, so that the server stops at once
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(sctx)
	cancel()
	os.Remove(d.cfg.Socket)
	if len(more) > 0 {
		os.Remove(api.PrivateSocket(d.cfg.Socket)) // root's, made by this start
	}
	d.log.Service(logfeed.Service{Stopping: true, Mechanism: tr.Mechanism(), Reason: reason})
	return stopErr
}

// newMetrics makes the daemon's metrics, whose gauges read the tracker
// in use, the claim index and the log feed when a scrape comes.
//
// The claim gauges come from the claim index, not the store: a scrape,
// anyone's on a TCP address, decoded every claim in the store (135 ms of
// CPU with one user's 16 MiB of claims; four scrape loops kept the
// daemon at 1.4 cores). They are one pass over the index, under its read
// lock.
func (d *Daemon) newMetrics() *metrics.Metrics {
	return metrics.New(d.cfg.Version, metrics.Options{
		Graph: func() (int, int) {
			tr := d.tr.Load()
			if tr == nil {
				return 0, 0
			}
			s := tr.Graph().Stats()
			return s.Live, s.Exited
		},
		Claims: func(emit func(kind, state string, n int)) {
			counts := map[store.Kind]map[store.State]int{}
			for _, k := range store.Kinds() {
				counts[k] = map[store.State]int{}
			}
			d.claims.mu.RLock()
			for _, c := range d.claims.byID {
				if counts[c.kind] != nil {
					counts[c.kind][c.state]++
				}
			}
			d.claims.mu.RUnlock()
			for _, k := range store.Kinds() {
				for _, s := range store.States() {
					emit(string(k), string(s), counts[k][s])
				}
			}
		},
		LogFeed: func() (uint64, uint64) {
			s := d.log.Stats()
			return s.Written, s.Dropped
		},
	})
}

// serveMetrics starts the Prometheus endpoint on the configured address;
// it stops with stop. An address Listen refuses as such (metrics.ErrAddress)
// fails the start. One well formed that cannot be bound now (another
// user's process on the TCP port first, a permission refused) does not:
// before, any local user who listened on the port first kept the daemon
// from starting, and systemd restarted it until its start limit. It is
// logged, in the feed (internal_error) and on stderr (the journal, where
// an operator looks when the scraper finds nothing), and tried again in
// the background (metrics.ListenRetry) until it binds or the daemon stops.
func (d *Daemon) serveMetrics(m *metrics.Metrics) (stop func(), err error) {
	addr := d.cfg.MetricsListen
	ln, lerr := metrics.Listen(addr)
	if errors.Is(lerr, metrics.ErrAddress) {
		return nil, fmt.Errorf("metrics_listen %q: %w", addr, lerr)
	}
	// stderr as it is now: the goroutine below does not read the variable
	// again.
	stderr := os.Stderr
	report := func(format string, args ...any) {
		msg := fmt.Sprintf("metrics_listen %q: ", addr) + fmt.Sprintf(format, args...)
		d.log.Internal(msg, nil)
		fmt.Fprintf(stderr, "supervisor: %s\n", msg)
	}
	if lerr != nil {
		report("%v; the daemon runs without its metrics endpoint, and tries again in the background", lerr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ln == nil {
			// A line when the error changes, not one per attempt: a port
			// held for good would write one every 30 s.
			last := lerr.Error()
			var err error
			ln, err = metrics.ListenRetry(ctx, addr, func(err error, wait time.Duration) {
				if err.Error() != last {
					last = err.Error()
					report("%v; trying again in %s", err, wait)
				}
			})
			if err != nil {
				if ctx.Err() == nil {
					report("%v; no metrics endpoint until the daemon restarts", err)
				}
				return
			}
			report("listening now, after failing at start")
		}
		m.ServeListener(ctx, ln)
	}()
	return func() { cancel(); <-done }, nil
}

// settleQueued settles the claim of a check from checkQ and of any others
// queued with it; a holder's exit wins over a plain pass for one claim.
func (d *Daemon) settleQueued(ctx context.Context, first check) {
	checks := map[string]Trigger{first.id: first.trigger}
	for len(checks) < noteQueue {
		select {
		case c := <-d.checkQ:
			if checks[c.id] != HolderExit {
				checks[c.id] = c.trigger
			}
			continue
		default:
		}
		break
	}
	for id, trig := range checks {
		d.settle(ctx, id, request{trigger: trig, async: true})
	}
}

// queue asks the main loop to settle a claim, without blocking: a full
// queue leaves it to the next periodic pass.
func (d *Daemon) queue(id string, trig Trigger) {
	select {
	case d.checkQ <- check{id, trig}:
	default:
	}
}

func (d *Daemon) listen() (net.Listener, error) {
	// Run made and checked the directory (prepareSocketDir). We hold the state lock; a socket file left there is stale or belongs
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

// listenPrivate listens on the private socket beside the API socket
// (api.PrivateSocket): mode 0600, the daemon's user's, so only root and
// that user reach it, whatever others do to the shared socket's backlog.
// The directory is the API socket's, checked already. A socket left
// there by an earlier run is replaced; anything else there, or a path
// too long, leaves the daemon without one, and says so: root's clients
// then use the shared socket.
func (d *Daemon) listenPrivate() net.Listener {
	p := api.PrivateSocket(d.cfg.Socket)
	if p == "" {
		d.log.Internal("no private socket: the path beside "+d.cfg.Socket+" is too long for a unix socket", nil)
		return nil
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			d.log.Internal("no private socket: "+p+" exists and is not a socket", nil)
			return nil
		}
		os.Remove(p)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", p)
	syscall.Umask(old)
	if err != nil {
		d.log.Internal("no private socket: "+err.Error(), nil)
		return nil
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		d.log.Internal("no private socket: "+err.Error(), nil)
		return nil
	}
	return ln
}

func (d *Daemon) claimLock(id string) *sync.Mutex {
	m, _ := d.locks.LoadOrStore(id, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// loadIndex fills the in-memory claim index from the store.
func (d *Daemon) loadIndex() error {
	cs, err := d.st.List(store.Filter{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	for i := range cs {
		d.claims.set(&cs[i])
	}
	return nil
}
