package lineage

import (
	"bytes"
	"strings"
	"time"

	"github.com/procsupervisor/supervisor/internal/token"
)

// Flags describe what the graph knows about a node.
type Flags uint16

// Node flags.
const (
	// BornObserved: the graph saw the fork event (not a seed, a resync, an
	// inference from a poller or from another event).
	BornObserved Flags = 1 << iota
	// Inferred: the node came from a poller's inferred event.
	Inferred
	// Exited: the process has exited (observed or implied).
	Exited
	// ExitObserved: the exit event was seen; ExitStatus is valid.
	ExitObserved
	// ExitImplied: the exit was deduced (a newer instance took the pid, a
	// resync did not find the process, a poller saw it vanish); ExitStatus is
	// unknown.
	ExitImplied
	// Execed: the process replaced its program at least once.
	Execed
	// AncestryElided: a birth ancestor between this node and its parent link
	// was dropped to bound memory (see Config.MaxPinned); PPid still names
	// the birth parent.
	AncestryElided
	// Root: the node is an admitted root (see Graph.Admit).
	Root
	// Reexeced: the graph saw the process replace its program more than
	// once (the daemon's launch shim, a program of its own, then the
	// workload).
	Reexeced
)

var flagNames = [...]string{"born-observed", "inferred", "exited", "exit-observed", "exit-implied", "execed", "ancestry-elided", "root", "reexeced"}

// Has reports whether all of want are set.
func (f Flags) Has(want Flags) bool { return f&want == want }

func (f Flags) String() string {
	var b strings.Builder
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n)
		}
	}
	return b.String()
}

// Internal flag bits, above the exported ones.
const (
	fCont         uint32 = 1 << 16 // watched without a gap since birth (valid while epoch is current)
	fBornExact    uint32 = 1 << 17 // bornBoot came from an event time, not start ticks
	fExitUpper    uint32 = 1 << 18 // exitBoot is an upper bound, not the exit time
	fRootObserved uint32 = 1 << 19 // every link to the admitted root was an observed fork
	fNew          uint32 = 1 << 20 // created by the reconcile in progress
	fCtx          uint32 = 1 << 21 // sid, pgid, leaders, cgroup and uid are set
	// fTwinDropped: a generation at the same pid with the same start
	// (precision and value) was dropped; a token without an inode can no
	// longer be told to name this one rather than that (see resolve).
	fTwinDropped uint32 = 1 << 22
	exportMask   uint32 = 1<<16 - 1
)

// Node is a snapshot of one process instance.
type Node struct {
	Pid int32
	// PPid is the birth parent: the creator from the fork event, or the
	// parent a scan saw when the birth was not observed. 0 when unknown.
	PPid        int32
	Token       token.Token
	ParentToken token.Token
	Comm        [16]byte
	// Seen is when the graph recorded the node (graph clock).
	Seen time.Time
	// ExitedAt is when the graph recorded the exit, observed or implied;
	// zero while the process is live.
	ExitedAt time.Time
	// BootStart and BootExit are CLOCK_BOOTTIME instants of birth and exit
	// when known (from event times, or start ticks for BootStart), else 0.
	BootStart, BootExit time.Duration
	// ExitStatus is the wait(2) status, valid with ExitObserved.
	ExitStatus uint32
	Flags      Flags
	// Session is the process's session, group and cgroup, as its last
	// fork or exec event said (inherited from the parent at fork).
	Session Session
}

// Session is the small ids the graph keeps per process: strings (argv,
// paths) travel with the events, never in the graph.
type Session struct {
	// Known is false when no event carried the context (netlink, polling,
	// a seed) and no parent's could be inherited.
	Known bool
	// SID and PGID are the session and process group ids; SessionLeader
	// and GroupLeader their leaders' tokens, zero when the leader was gone.
	SID, PGID     int32
	SessionLeader token.Token
	GroupLeader   token.Token
	// CgroupID is the cgroup2 id.
	CgroupID uint64
	// UID is the real uid.
	UID uint32
}

// CommString returns Comm without its NUL padding.
func (n Node) CommString() string {
	i := bytes.IndexByte(n.Comm[:], 0)
	if i < 0 {
		i = len(n.Comm)
	}
	return string(n.Comm[:i])
}

// Live reports whether the node has not exited.
func (n Node) Live() bool { return n.Flags&Exited == 0 }

// node is the graph's internal record (208 bytes: TestNodeSize). Indices
// are into the graph's slot storage; 0 means none. The boot id lives once
// in the graph.
type node struct {
	// Session context (fCtx): session and group leader tokens (start,
	// inode, with the node's own precision), cgroup id.
	sstart, sino, gstart, gino uint64
	cgroup                     uint64
	sid, pgid                  int32
	uid                        uint32 // real uid (fCtx)
	start, ino                 uint64 // token
	pstart, pino               uint64 // parent token
	bornBoot, exitBoot         uint64 // CLOCK_BOOTTIME ns, 0 unknown
	seenAt, exitAt             int64  // graph clock, unix ns
	sinceAt, listedAt          int64  // continuity start; when put on its list
	pid, ppid                  int32
	status                     uint32
	parent, child              uint32 // birth tree: parent, first child
	next, prev                 uint32 // siblings under parent
	older, newer               uint32 // generations at the same pid
	lnext, lprev               uint32 // retention list, or free list (lnext)
	needKids                   uint32 // children that are live or pinned
	root                       uint32 // index into Graph.roots, 0 none
	epoch                      uint32 // graph epoch when continuity was last settled
	flags                      uint32
	prec, pprec                token.Precision
	list                       uint8
	comm                       [16]byte
}

// Lists a node can be on.
const (
	onNone     uint8 = iota // live
	onRetained              // exited, no live descendant
	onPinned                // exited, kept for a live descendant
	onFree
)

func (n *node) live() bool   { return n.flags&uint32(Exited) == 0 }
func (n *node) needed() bool { return n.live() || n.needKids > 0 }

// sameInstance reports whether tok can name n as far as an event stream is
// concerned: same precision and start, and pidfs inodes equal where both are
// known. (Queries use token.Compare instead, which is stricter.)
func (n *node) sameInstance(tok token.Token) bool {
	return n.prec != 0 && n.prec == tok.Prec && n.start == tok.Start &&
		(n.ino == 0 || tok.Ino == 0 || n.ino == tok.Ino)
}

// age compares n's birth with that of the instance named by tok (born at
// boottime t, 0 unknown): -1 when n is provably older, +1 when provably
// newer, 0 when it cannot tell. Instances at one pid are ordered by start
// time, then by pidfs inode, which the kernel hands out in increasing order
// and never reuses within a boot; tokens of different precision fall back
// to boottimes.
func (n *node) age(tok token.Token, t uint64) int {
	if !tok.IsZero() && n.prec == tok.Prec {
		switch {
		case n.start < tok.Start:
			return -1
		case n.start > tok.Start:
			return 1
		case n.ino == 0 || tok.Ino == 0 || n.ino == tok.Ino:
			return 0
		case n.ino < tok.Ino:
			return -1
		}
		return 1
	}
	if t == 0 || n.bornBoot == 0 || t == n.bornBoot {
		return 0
	}
	if n.bornBoot < t {
		return -1
	}
	return 1
}

// tickNs is one clock tick (USER_HZ is 100 on every Linux architecture).
const tickNs = 10_000_000

// bootOf estimates the CLOCK_BOOTTIME of a start token: the start of its
// tick, a lower bound. 0 for tokens that are not in ticks.
// startBootOf returns n's start as a CLOCK_BOOTTIME time: its token's
// tick, or, for a node without a token (a netlink fork whose child had
// exited before its token could be read), its fork's event time; 0 when
// unknown.
func startBootOf(n *node) uint64 {
	if n.prec != 0 {
		return bootOf(token.Token{Start: n.start, Prec: n.prec})
	}
	return n.bornBoot
}

// near reports whether two CLOCK_BOOTTIME times are within two clock
// ticks of each other.
func near(a, b uint64) bool {
	if a < b {
		a, b = b, a
	}
	return a-b < 2*tickNs
}

// mayBeTwins reports whether a and b, two generations at one pid, may have
// started in one clock tick, which a token without an inode cannot tell
// apart: their starts are equal, or one has no token and its fork came
// within two ticks of the other's start, or when is not known.
func mayBeTwins(a, b *node) bool {
	if a.prec != 0 && b.prec != 0 {
		return a.prec == b.prec && a.start == b.start
	}
	sa, sb := startBootOf(a), startBootOf(b)
	return sa == 0 || sb == 0 || near(sa, sb)
}

func bootOf(tok token.Token) uint64 {
	if tok.Prec != token.Ticks || tok.Start > (1<<64-1)/tickNs {
		return 0
	}
	return tok.Start * tickNs
}

const (
	chunkBits = 9
	chunkSize = 1 << chunkBits
)

// slots is chunked node storage: growth never copies existing nodes (no
// latency spike on the event path), and slack stays under one chunk.
type slots struct {
	chunks []*[chunkSize]node
	n      uint32 // high-water mark; slot 0 is reserved
	free   uint32 // free list through lnext
}

func (s *slots) at(i uint32) *node { return &s.chunks[i>>chunkBits][i&(chunkSize-1)] }

func (s *slots) alloc() uint32 {
	if s.free != 0 {
		i := s.free
		n := s.at(i)
		s.free = n.lnext
		*n = node{}
		return i
	}
	if s.n == 0 {
		s.n = 1
	}
	if int(s.n>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, new([chunkSize]node))
	}
	i := s.n
	s.n++
	return i
}

func (s *slots) release(i uint32) {
	n := s.at(i)
	*n = node{list: onFree, lnext: s.free}
	s.free = i
}

// list is an intrusive FIFO of node indices through lnext/lprev.
type list struct {
	head, tail uint32
	n          int
}
