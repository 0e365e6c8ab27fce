package fallback

import (
	"fmt"
	"sync"
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
)

// Continuity remembers, for each pid, the instance (exact token) the
// successful snapshots have shown without interruption, and since when. A
// failed poll, or two successful polls further apart than the tracker's
// maximum gap, breaks every run: after a gap nothing is continuous.
//
// Observe and Fail are called by the one goroutine that polls (the Poller's
// reader); the queries may be called from any goroutine.
type Continuity struct {
	mu     sync.Mutex
	maxGap time.Duration
	// brk is the time of the latest break (a failed poll, a late poll, or
	// the tracker's creation): no run reaches back before it.
	brk       time.Time
	last      time.Time // Taken of the latest successful snapshot
	runs      map[int32]run
	prev, cur *Snapshot // cur's predecessor, nil unless consecutive
	gaps      uint64
	broken    bool // a failure since the last Observe
}

type run struct {
	tok token.Token
	// after: the latest moment at which continuity was not established for
	// this instance (the snapshot that lacked it, or the break before its
	// first snapshot). Every snapshot after it showed the instance.
	after time.Time
	seq   uint64 // Seq of the latest snapshot that showed it
}

// NewContinuity returns a tracker. Two successful snapshots further apart
// than maxGap count as a missed poll (0: no limit). Claims made before now
// are never continuous.
func NewContinuity(now time.Time, maxGap time.Duration) *Continuity {
	return &Continuity{maxGap: maxGap, brk: now, runs: make(map[int32]run)}
}

// Fail records a failed poll at t: every run is broken.
func (c *Continuity) Fail(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.breakAt(t)
}

func (c *Continuity) breakAt(t time.Time) {
	c.broken = true
	c.gaps++
	if t.After(c.brk) {
		c.brk = t
	}
	clear(c.runs)
	c.prev, c.cur = nil, nil
}

// Observe records a successful snapshot.
func (c *Continuity) Observe(s *Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.last.IsZero() && c.maxGap > 0 && s.Taken.Sub(c.last) > c.maxGap {
		c.breakAt(c.last) // a missed poll: nothing seen after c.last was watched
	}
	if c.broken {
		c.prev = nil
	} else {
		c.prev = c.cur
	}
	c.broken = false
	for i := range s.Entries {
		e := &s.Entries[i]
		r, ok := c.runs[e.Pid]
		switch {
		case e.Partial():
			// Who held the pid is unknown: the run ends here.
			delete(c.runs, e.Pid)
			continue
		case ok && r.tok == e.Token:
		case ok:
			r = run{tok: e.Token, after: c.last} // reissued since the last look
		default:
			after := c.brk
			if c.last.After(after) {
				after = c.last
			}
			r = run{tok: e.Token, after: after}
		}
		r.seq = s.Seq
		c.runs[e.Pid] = r
	}
	for pid, r := range c.runs {
		if r.seq != s.Seq {
			delete(c.runs, pid)
		}
	}
	c.last, c.cur = s.Taken, s
}

// Seen reports whether the instance (pid, tok) was shown, with exactly this
// token, by every successful snapshot taken after since, with no failed or
// missed poll since then, and by at least one snapshot.
func (c *Continuity) Seen(pid int32, tok token.Token, since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.runs[pid]
	return ok && !tok.IsZero() && r.tok == tok && since.After(r.after) && c.last.After(since)
}

// Current returns the latest successful snapshot, nil after a failure.
func (c *Continuity) Current() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Gaps counts failed and missed polls.
func (c *Continuity) Gaps() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gaps
}

// Instance names one process instance as the poller sees it.
type Instance struct {
	Pid   int32
	Token token.Token
}

// Membership is the answer of Member.
type Membership uint8

// Memberships.
const (
	// Member: the instance's ppid chain reached the root, through the same
	// instances, in the last two snapshots, which were consecutive.
	Member Membership = iota + 1
	// Unverified: the chain was not seen the same in two consecutive
	// snapshots, or does not reach the root. Polling cannot tell a process
	// that never belonged from one that was double-forked and reparented
	// between two looks, so this is never a reason to act on the process:
	// not a member to spare, not a ghost to reap.
	Unverified
	// Absent: the instance is not in the latest snapshot (born between two
	// looks, or gone): skipped, not judged.
	Absent
)

func (m Membership) String() string {
	switch m {
	case Member:
		return "member"
	case Unverified:
		return "unverified"
	case Absent:
		return "absent"
	}
	return "invalid"
}

// maxDepth bounds a ppid walk (a cycle in a corrupt table ends it).
const maxDepth = 4096

// Member tells whether the instance descends from root according to the
// ppid chains of the last two snapshots. Tokens compare exactly, so root
// must be given as this poller sees it (its Entry.Token).
func (c *Continuity) Member(inst, root Instance) (Membership, string) {
	c.mu.Lock()
	cur, prev := c.cur, c.prev
	c.mu.Unlock()
	if cur == nil {
		return Unverified, "no successful snapshot since the last failed poll"
	}
	if e := cur.Lookup(inst.Pid); e == nil || e.Token != inst.Token {
		return Absent, "not in the latest snapshot: skipped, not judged"
	}
	if prev == nil {
		return Unverified, "the chain was not seen in two consecutive snapshots"
	}
	a, okA := chain(cur, inst, root)
	b, okB := chain(prev, inst, root)
	switch {
	case !okA || !okB:
		return Unverified, a + "; " + b
	case a != b:
		return Unverified, "the chain to the root changed between two snapshots"
	}
	return Member, "ppid chain to the root seen, instance by instance, in two consecutive snapshots"
}

// chain walks the ppid links from inst to root in s. It returns a
// fingerprint of the chain when root is reached, or a reason.
func chain(s *Snapshot, inst, root Instance) (string, bool) {
	e := s.Lookup(inst.Pid)
	if e == nil || e.Token != inst.Token {
		return "instance not in the earlier snapshot", false
	}
	fp := make([]byte, 0, 64)
	for depth := 0; depth < maxDepth; depth++ {
		if e.Partial() {
			return fmt.Sprintf("pid %d has no start time in a snapshot", e.Pid), false
		}
		fp = e.Token.Append(append(fp, '/'))
		if e.Pid == root.Pid {
			if e.Token != root.Token {
				return "the root's pid is held by another instance", false
			}
			return string(fp), true
		}
		if e.PPid <= 0 || e.Pid == 1 {
			return "the ppid chain ends without reaching the root", false
		}
		p := s.Lookup(e.PPid)
		if p == nil {
			return fmt.Sprintf("parent %d of %d not in the snapshot", e.PPid, e.Pid), false
		}
		e = p
	}
	return "the ppid chain loops", false
}
