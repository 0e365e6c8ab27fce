package logfeed

import (
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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

// withholdMin is the argument bytes (the process's, and its parent's
// apart) a line of a user over its share keeps of each.
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
// encoded, and while its uid's bucket is empty its next lines keep at
// most withholdMin bytes of the process's arguments and as many of its
// parent's (the rest marked args_withheld, with the real count and size)
// and the last pathKeep bytes of each path (marked truncated). The user's
// lines are still written, every one, with the head of each command line,
// and no other user's are touched. A user may spend its share on purpose
// before a command whose arguments it would hide past their first KiB:
// the mark says so.
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
	full := s.rate * shareBurst
	if t := sh.tokens.Load(); t < -full {
		// The debt is at most one burst: a user whose storm ended is
		// whole again within 2*shareBurst seconds, however long it
		// stormed. (Charges since the load are lost to the floor.)
		sh.tokens.Store(-full)
	}
	if d := now - sh.at; d > 0 {
		// Past 2*shareBurst seconds the bucket is full whatever the rate
		// (and d*rate would overflow after some days).
		d = min(d, 2*shareBurst*1e9)
		if t := sh.tokens.Load(); t < full {
			sh.tokens.Add(min(int64(float64(d)*float64(s.rate)/1e9), full-t))
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
//
// Only owners have entries: a subordinate uid is looked up at each of its
// lines (a lock and a scan of the ranges, where a map entry for each of a
// range's 65,536 uids would fill maxShares, and every uid met after them
// would share one bucket the range's user could spend). The owner's own
// bucket, not its owner's: one step, whatever the ranges say of the
// owner (a loop of them included).
func (s *shares) get(uid uint32, now int64) *share {
	if sh := s.byUID[uid]; sh != nil {
		return sh
	}
	if s.owner != nil && uid != noUID {
		uid = s.owner(uid)
		if sh := s.byUID[uid]; sh != nil {
			return sh
		}
	}
	if len(s.byUID) >= maxShares {
		uid = noUID
		if sh := s.byUID[uid]; sh != nil {
			return sh
		}
	}
	sh := &share{at: now}
	sh.tokens.Store(s.rate * shareBurst)
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

// heavy reports whether a line of ev has more than withholdMin bytes of
// arguments (its own, or its parent's), or a path (executable or working
// directory, its own or its parent's) of more than pathKeep bytes: what
// a user over its share has cut (trim).
func heavy(ev *events.Event) bool {
	if argsOver(ev.Argv) || len(ev.Exe) > pathKeep || len(ev.Exec.Cwd) > pathKeep {
		return true
	}
	d := ev.Parent
	return d != nil && (argsOver(d.Argv) || len(d.Exe) > pathKeep || len(d.Exec.Cwd) > pathKeep)
}

// argsOver reports whether argv, joined by spaces as in command_line,
// holds more than withholdMin bytes.
func argsOver(argv []string) bool { return lineCut(argv, withholdMin) }

// pathKeep is the bytes of a path a line of a user over its share keeps:
// its end, where the file's own name is.
const pathKeep = 512

// trim returns ev as the capture's own copy for a user over its share:
// its arguments and its parent's are cut to withholdMin bytes (c.cut, the
// line's bound for this line: the encoders mark the cut with the real
// size) and marked ArgsWithheld where they were longer; a longer path is
// cut to its last pathKeep bytes, marked truncated, as a path is that met
// a bound in the kernel. Only the line's copy changes: ev and the cache's
// description stay whole.
func (c *capture) trim(ev *events.Event) *events.Event {
	c.held, c.cut = *ev, withholdMin
	trimDesc(&c.held.Exe, c.held.Argv, &c.held.Exec)
	if d := ev.Parent; d != nil {
		c.heldParent = *d
		trimDesc(&c.heldParent.Exe, c.heldParent.Argv, &c.heldParent.Exec)
		c.held.Parent = &c.heldParent
	}
	return &c.held
}

func trimDesc(exe *string, argv []string, x *events.ExecInfo) {
	if argsOver(argv) {
		x.ArgsCount, x.ArgsSize = argsCount(argv, x), argsSize(argv, x)
		x.ArgsWithheld = true
	}
	if len(*exe) > pathKeep {
		*exe, x.ExeTruncated = pathEnd(*exe), true
	}
	if len(x.Cwd) > pathKeep {
		x.Cwd, x.CwdTruncated = pathEnd(x.Cwd), true
	}
}

// pathEnd is the last pathKeep bytes of p, or a little less, so as not to
// start inside a UTF-8 character nor with a slash: a cut path never reads
// as an absolute one (events.ExecInfo.ExeTruncated).
func pathEnd(p string) string {
	i := len(p) - pathKeep
	for i < len(p) && (!utf8.RuneStart(p[i]) || p[i] == '/') {
		i++
	}
	return p[i:]
}
