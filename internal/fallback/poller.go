package fallback

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/procsupervisor/supervisor/internal/events"
)

// StatusUnknown is the Status of an inferred Exit: polling never sees an
// exit status. It is a wait(2) "stopped" status, so Event.Exited and
// Event.Signaled both report false for it.
const StatusUnknown uint32 = 0x7f

// PollerOptions configure a Poller. Zero fields take the defaults.
type PollerOptions struct {
	// Interval between the starts of two polls; default 1 s.
	Interval time.Duration
	// MaxGap: two successful polls further apart count as a missed poll
	// (continuity breaks); default 3 intervals plus the snapshot timeout
	// a ps run may take (30 s).
	MaxGap time.Duration
	// Log receives one line per failed poll; default no logging.
	Log zerolog.Logger
}

// PollStats counts polls.
type PollStats struct {
	Polls     uint64 // snapshots attempted
	Failures  uint64 // snapshots that failed (each delivered as a Lost gap)
	LastError string // why the latest failed snapshot failed
}

// Poller is an events.Source that infers Fork and Exit events from the
// differences between successive snapshots. It polls inside Read, in the
// caller's goroutine: there is no background goroutine, and a consumer that
// stops reading stops polling (the next poll then counts as late and breaks
// continuity).
type Poller struct {
	snap     Snapshotter
	interval time.Duration
	log      zerolog.Logger
	cont     *Continuity

	// closing is cancelled by Close; it ends a wait or a snapshot in Read.
	closing context.Context
	cancel  context.CancelFunc

	// Owned by the reader goroutine.
	known   map[int32]Entry // the last known instance at each pid
	queue   []events.Event
	head    int
	next    time.Time
	scratch []int32
	// tick is SnapshotTick: the boot-time tick at which the snapshot
	// behind queue began.
	tick uint64

	mu    sync.Mutex
	stats events.Stats
	polls PollStats
}

// NewPoller takes a first snapshot (the baseline against which the first
// Read infers events) and returns the poller. A failed baseline is an error.
func NewPoller(ctx context.Context, s Snapshotter, opts PollerOptions) (*Poller, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.MaxGap <= 0 {
		opts.MaxGap = 3*opts.Interval + 30*time.Second
	}
	p := &Poller{
		snap: s, interval: opts.Interval, log: opts.Log,
		cont:  NewContinuity(time.Now(), opts.MaxGap),
		known: make(map[int32]Entry),
	}
	base, err := s.Snapshot(ctx)
	p.polls.Polls++
	if err != nil {
		return nil, fmt.Errorf("%s poller: first snapshot: %w", s.Mechanism(), err)
	}
	p.cont.Observe(base)
	for i := range base.Entries {
		if e := base.Entries[i]; !e.Partial() {
			p.known[e.Pid] = e
		}
	}
	p.next = base.Taken.Add(p.interval)
	p.closing, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// SnapshotTick returns the CLOCK_BOOTTIME clock tick (USER_HZ, the unit of
// /proc start times) at which the snapshot began whose events Read returns
// now; 0 where unknown (not Linux). An instance whose token starts before
// that tick was the one the snapshot saw as long as a process at its pid
// has that start time: one that took the pid after the snapshot read it
// started later. One that started in that tick or later cannot be told
// from a successor born within its tick without the pidfs inode, which
// this poller's tokens lack. Read's goroutine only.
func (p *Poller) SnapshotTick() uint64 { return p.tick }

// Mechanism returns the snapshotter's mechanism.
func (p *Poller) Mechanism() events.Mechanism { return p.snap.Mechanism() }

// Continuity returns the tracker the poller feeds, for Judge and Member.
func (p *Poller) Continuity() *Continuity { return p.cont }

// latest returns the latest successful snapshot, nil after a failed poll.
func (p *Poller) latest() *Snapshot { return p.cont.Current() }

// Stats returns the event counters. A failed poll counts one LostReport;
// Lost stays 0 because the number of events missed is unknown.
func (p *Poller) Stats() events.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Polls returns the poll counters.
func (p *Poller) Polls() PollStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls
}

// Close makes a blocked or later Read return events.ErrClosed.
func (p *Poller) Close() error {
	p.cancel()
	return nil
}

// Read blocks until the next inferred event, polling as needed, and fills
// ev. A failed poll is delivered as a Lost event (Count 0: unknown), never
// as exits. Read returns events.ErrClosed after Close.
func (p *Poller) Read(ev *events.Event) error {
	for p.head == len(p.queue) {
		if err := p.closing.Err(); err != nil {
			return events.ErrClosed
		}
		if d := time.Until(p.next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-p.closing.Done():
				t.Stop()
				return events.ErrClosed
			case <-t.C:
			}
		}
		p.next = time.Now().Add(p.interval)
		if err := p.poll(); err != nil {
			if p.closing.Err() != nil {
				return events.ErrClosed
			}
			p.mu.Lock()
			p.polls.Failures++
			p.polls.LastError = err.Error()
			p.stats.LostReports++
			p.mu.Unlock()
			p.log.Error().Err(err).Str("mechanism", string(p.snap.Mechanism())).
				Msg("process table poll failed: no verdict from it; continuity broken")
			*ev = events.Event{Kind: events.Lost, Mechanism: p.snap.Mechanism()}
			return nil
		}
	}
	*ev = p.queue[p.head]
	p.queue[p.head] = events.Event{}
	p.head++
	p.mu.Lock()
	p.stats.Events++
	p.mu.Unlock()
	return nil
}

// poll takes one snapshot and queues the events it implies.
func (p *Poller) poll() error {
	p.mu.Lock()
	p.polls.Polls++
	p.mu.Unlock()
	tick := bootTick()
	s, err := p.snap.Snapshot(p.closing)
	if err != nil {
		p.cont.Fail(time.Now())
		return err
	}
	p.tick = tick
	p.cont.Observe(s)
	p.queue, p.head = p.queue[:0], 0
	mech := s.Mechanism
	// Exits: known instances whose pid is gone or holds another instance.
	p.scratch = p.scratch[:0]
	for pid := range p.known {
		p.scratch = append(p.scratch, pid)
	}
	slices.Sort(p.scratch)
	for _, pid := range p.scratch {
		old := p.known[pid]
		e := s.Lookup(pid)
		switch {
		case e == nil:
		case e.Partial(), e.Token == old.Token:
			continue // still there, or unknown: keep the old instance
		}
		ev := events.Event{Kind: events.Exit, Mechanism: mech, Inferred: true,
			Pid: pid, PPid: old.PPid, Token: old.Token, Comm: old.Comm, Status: StatusUnknown}
		if pe, ok := p.known[old.PPid]; ok {
			ev.ParentToken = pe.Token
		}
		p.queue = append(p.queue, ev)
		delete(p.known, pid)
	}
	// Forks: instances not known before, parents before children.
	forks := len(p.queue)
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Partial() {
			continue
		}
		if _, ok := p.known[e.Pid]; ok {
			continue
		}
		p.queue = append(p.queue, events.Event{Kind: events.Fork, Mechanism: mech, Inferred: true,
			Pid: e.Pid, PPid: e.PPid, Token: e.Token, Comm: e.Comm})
	}
	for i := forks; i < len(p.queue); i++ {
		p.known[p.queue[i].Pid] = *s.Lookup(p.queue[i].Pid)
	}
	for i := forks; i < len(p.queue); i++ {
		if pe, ok := p.known[p.queue[i].PPid]; ok {
			p.queue[i].ParentToken = pe.Token
		}
	}
	orderParentsFirst(p.queue[forks:])
	// Keep State and Args of unchanged instances current.
	for i := range s.Entries {
		e := &s.Entries[i]
		if old, ok := p.known[e.Pid]; ok && old.Token == e.Token {
			p.known[e.Pid] = *e
		}
	}
	return nil
}

// orderParentsFirst orders fork events so that a parent's fork precedes its
// children's, otherwise by start time and pid. A ppid cycle (only a corrupt
// table has one) is broken arbitrarily.
func orderParentsFirst(f []events.Event) {
	slices.SortFunc(f, func(a, b events.Event) int {
		if a.Token.Start != b.Token.Start {
			if a.Token.Start < b.Token.Start {
				return -1
			}
			return 1
		}
		return int(a.Pid) - int(b.Pid)
	})
	pos := make(map[int32]int, len(f))
	for i := range f {
		pos[f[i].Pid] = i
	}
	done := make([]bool, len(f))
	out := make([]events.Event, 0, len(f))
	var visit func(i, depth int)
	visit = func(i, depth int) {
		if done[i] {
			return
		}
		done[i] = true
		if j, ok := pos[f[i].PPid]; ok && depth < maxDepth {
			visit(j, depth+1)
		}
		out = append(out, f[i])
	}
	for i := range f {
		visit(i, 0)
	}
	copy(f, out)
}

var _ events.Source = (*Poller)(nil)
