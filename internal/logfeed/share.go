package logfeed

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
)

// DefaultUserBytes is Config.UserBytes when it is 0: the process-line
// bytes a second one user's processes may put in the feed with their
// arguments, over a burst of shareBurst seconds of it.
const DefaultUserBytes = 8 << 20

// MaxUserBytes bounds Config.UserBytes (1 TiB a second: no bound in
// practice, and room for the bucket's arithmetic).
const MaxUserBytes = 1 << 40

// shareBurst is how many seconds of its rate a user's bucket holds.
const shareBurst = 4

// withholdMin is the argument bytes (the process's and its parent's) past
// which a line of a user over its share is written without them: a line
// with fewer costs no more than its other fields.
const withholdMin = 1 << 10

// maxShares bounds the users metered one by one; past it, users not yet
// met share one bucket (that of lines whose uid is unknown).
const maxShares = 1 << 16

// shares meters the bytes of process lines by the real uid of the
// process they describe (root's excepted: its processes are the host's
// own). The lines are encoded on the event source's goroutine, which
// every verdict waits on to be up to date: unmetered, one user whose
// processes fork in a loop under a 32 KiB command line of control bytes
// (a 786 KB line each: the arguments escaped, in args and command_line,
// for the process and its parent) kept that goroutine seconds behind the
// kernel, and every other user's requests failed. Each uid has a token
// bucket of rate bytes a second; a line is charged its whole length once
// encoded, and while its uid's bucket is empty the next lines with more
// than withholdMin bytes of arguments are encoded without them (marked
// args_withheld; the count and size stay). The user's own lines are still
// written, every one, and no other user's are touched.
type shares struct {
	rate     int64 // bytes a second
	owner    func(uid uint32) uint32
	epoch    time.Time
	withheld atomic.Uint64 // lines written with their arguments withheld
	mu       sync.Mutex
	byUID    map[uint32]*share // never shrinks: a *share stays its uid's
}

type share struct {
	tokens atomic.Int64 // bytes it may still write: taken without s.mu
	at     int64        // the clock of the last refill (s.mu)
}

// newShares returns a meter of rate bytes a second per user, or nil for
// none (rate < 0). owner, when set, names the user a uid's lines count
// for (Config.ShareOf), looked up once, when the uid is first met.
func newShares(rate int64, owner func(uint32) uint32) *shares {
	if rate < 0 {
		return nil
	}
	if rate == 0 {
		rate = DefaultUserBytes
	}
	return &shares{rate: rate, owner: owner, epoch: time.Now(), byUID: make(map[uint32]*share)}
}

// over reports whether uid's bucket is empty at now (the event's boottime
// ns; 0 for none: the monotonic clock's, read through the vDSO, where a
// boottime read is a system call). A source gives every event a time or
// none; a jump between the two clocks (a mechanism that fell back) fills
// or leaves the buckets once. A uid met for the first time starts full.
func (s *shares) over(uid uint32, now int64) (*share, bool) {
	if now == 0 {
		now = int64(time.Since(s.epoch))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.get(uid, now)
	if d := now - sh.at; d > 0 {
		// Past shareBurst seconds the bucket is full whatever the rate
		// (and d*rate would overflow after some days).
		d = min(d, shareBurst*1e9)
		if t := sh.tokens.Load(); t < s.rate*shareBurst {
			sh.tokens.Add(min(int64(float64(d)*float64(s.rate)/1e9), s.rate*shareBurst-t))
		}
		sh.at = now
	}
	return sh, sh.tokens.Load() <= 0
}

// charge takes n bytes from the bucket over returned, withheld saying
// whether the line was written without its arguments.
func (s *shares) charge(sh *share, n int, withheld bool) {
	sh.tokens.Add(-int64(n))
	if withheld {
		s.withheld.Add(1)
	}
}

// get returns uid's bucket (s.mu held), made full at now when new: its
// owner's (one bucket for a user and its subordinate uids, so that a user
// with a range of them cannot multiply its share).
func (s *shares) get(uid uint32, now int64) *share {
	if sh := s.byUID[uid]; sh != nil {
		return sh
	}
	if len(s.byUID) >= maxShares {
		uid = noUID
		if sh := s.byUID[uid]; sh != nil {
			return sh
		}
	}
	key := uid
	if s.owner != nil && uid != noUID {
		// The owner's own bucket, not its owner's: one step, whatever
		// the ranges say of the owner (a loop of them included).
		key = s.owner(uid)
	}
	sh := s.byUID[key]
	if sh == nil {
		sh = &share{at: now}
		sh.tokens.Store(s.rate * shareBurst)
		s.byUID[key] = sh
	}
	s.byUID[uid] = sh
	return sh
}

// Withheld returns how many lines were written with their arguments
// withheld.
func (s *shares) Withheld() uint64 {
	if s == nil {
		return 0
	}
	return s.withheld.Load()
}

// argBytes is the argument bytes a line of ev writes (its own and its
// parent's), counted up to limit.
func argBytes(ev *events.Event, limit int) int {
	n := 0
	for _, a := range ev.Argv {
		if n += len(a); n > limit {
			return n
		}
	}
	if d := ev.Parent; d != nil {
		for _, a := range d.Argv {
			if n += len(a); n > limit {
				return n
			}
		}
	}
	return n
}

// withhold returns ev as the capture's own copy without its arguments,
// nor its parent's, when either has some: marked ArgsWithheld, the
// counts and sizes kept.
func (c *capture) withhold(ev *events.Event) *events.Event {
	c.held = *ev
	if len(ev.Argv) > 0 {
		c.held.Exec.ArgsCount = argsCount(ev.Argv, &ev.Exec)
		c.held.Exec.ArgsSize = argsSize(ev.Argv, &ev.Exec)
		c.held.Argv, c.held.Exec.ArgsWithheld = nil, true
	}
	if d := ev.Parent; d != nil && len(d.Argv) > 0 {
		c.heldParent = *d
		c.heldParent.Exec.ArgsCount = argsCount(d.Argv, &d.Exec)
		c.heldParent.Exec.ArgsSize = argsSize(d.Argv, &d.Exec)
		c.heldParent.Argv, c.heldParent.Exec.ArgsWithheld = nil, true
		c.held.Parent = &c.heldParent
	}
	return &c.held
}
