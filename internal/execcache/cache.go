// Package execcache keeps, for a bounded number of process instances, what
// their last exec showed (events.Desc: comm, executable, arguments, working
// directory and context), so that the events of their children can say who
// the parent is (ECS process.parent.*) although the lineage graph keeps no
// strings.
//
// Mechanism. Observe is called once per event, in the order the mechanism
// delivers them, on one goroutine. An exec stores its description under
// (pid, token), its strings copied into buffers the entry's slot keeps
// from one entry to the next (an event's strings live only until the
// source's next event, see events.Event); a fork the kernel described
// (Ctx.Valid) refreshes its creator's ids, groups, session and terminal,
// which the child inherited at that moment; an exit marks the entry exited, and Forget drops it at once
// when the caller knows no child can name it (the tracker asks the lineage
// graph: an exited process with no birth child). Every event then gets
// Event.Parent: the entry whose pid and token are exactly the event's
// PPid and ParentToken, nil otherwise.
//
// Forks. A child runs its parent's image until it execs: a fork whose
// parent has an entry gives the child an entry of its own (its name and
// context) that shares the parent's image rather than copying it, by the
// image's slot and that slot's generation, which moves on when the slot's
// entry execs again or is dropped. The fork, the child's exit and its
// children's events (as Parent) get the image while the generation
// holds, and none after: a master's workers (nginx, a shell's subshells)
// are described by what they run, never by what their parent ran later.
// (An exit gets only the executable: see Observe.)
// A fork's entry never takes the room of an exec's live entry (see
// adopt).
//
// Never wrong. An entry lends its strings only to the instance its token
// names: a fork or an exec of another instance at the pid drops it (a fork
// at pid P proves every earlier instance at P gone, even one whose token
// lacks the pidfs inode and would compare equal within a clock tick); an
// exec that cannot be stored (no token, inferred, too big) drops the
// entry of its pid, since its program is superseded; a Lost event clears
// the cache, since a missed exec could have superseded any entry. A
// parent has no Desc when neither its exec nor its fork from a described
// parent was seen.
//
// The pid index is a pidtab.Table (no hashing on the event path).
//
// Limits. At most Config.Entries entries and Config.Bytes bytes (an entry
// is charged the bytes of its paths and arguments plus 16 per argument,
// or its slot's buffers when they are larger); one entry above Bytes/16
// is not stored at all. Free slots keep their buffers up to 16 KiB each
// and 1 MiB in all. When full, exited entries go first, oldest exit
// first, then the live entries forks made (oldest first: a prefork
// master's workers go before the master whose image they share), then
// the live entry whose exec is oldest. The ids of a parent are those of
// its last exec or fork seen: a setuid(2) in between is not an event any
// mechanism reports, so an image whose exec ran with other ids than the
// entry has now is marked (events.ExecInfo.OtherIDs).
package execcache

import (
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/pidtab"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Defaults.
const (
	DefaultEntries = 8192
	DefaultBytes   = 16 << 20
)

// Config bounds a Cache.
type Config struct {
	// Entries bounds the instances kept (DefaultEntries when 0).
	Entries int
	// Bytes bounds the bytes of strings kept (DefaultBytes when 0).
	Bytes int64
}

// Stats counts what a Cache did.
type Stats struct {
	Entries int   // entries held
	Bytes   int64 // bytes charged (strings, or the buffers holding them)
	Stored  uint64
	Hits    uint64 // events given a Parent
	Misses  uint64 // events with a parent token but no entry for it
	Evicted uint64 // entries dropped to make room
	TooBig  uint64 // execs not stored for their size
	Cleared uint64 // Lost events that emptied the cache
	// Forgotten: exited entries dropped because no child could need them.
	Forgotten uint64
}

// none marks the end of a list.
const none = -1

type slot struct {
	pid  int32
	tok  token.Token
	desc events.Desc
	// mem and argv hold desc's strings and argument vector: copies of the
	// event's, which live only until the source's next event. They stay
	// with the slot when it is freed (within keepSlotBytes, and keepBytes
	// for all free slots), so that an exec storm, whose children take and
	// free the same few slots, copies into memory it already has.
	mem        []byte
	argv       []string
	cost       int64
	exited     bool
	prev, next int32
	// gen counts the images the slot has held: it changes when its entry
	// execs again or is dropped, so that an entry sharing its image
	// (img) can tell it no longer holds the one it shared.
	gen uint64
	// img is 0 for an entry whose image (executable, arguments) is its
	// own exec's; for one made by a fork it is the slot + 1 of the
	// image it inherited, valid while that slot's gen is imgGen.
	img    int32
	imgGen uint64
	// sameCgroup: the fork that made this entry was in the cgroup its
	// image's exec was in, so the image's cgroup path and container are
	// this process's too.
	sameCgroup bool
	// execIDs are the real, effective and saved uid and gid the image's
	// exec ran with (an own image's), when the exec's context had them.
	execIDs   [6]uint32
	execIDsOK bool
}

// ids returns the six ids of c, and whether c has them.
func ids(c *events.Context) ([6]uint32, bool) {
	return [6]uint32{c.UID, c.EUID, c.SUID, c.GID, c.EGID, c.SGID}, c.Has(events.CtxIDs)
}

// otherIDs reports whether the image slot j holds was exec'd with ids
// other than c's, or with ids not known.
func (c *Cache) otherIDs(j int32, ctx *events.Context) bool {
	v, ok := ids(ctx)
	s := &c.slots[j]
	return !ok || !s.execIDsOK || v != s.execIDs
}

// Bounds on the buffers free slots keep for their next entry.
const (
	keepSlotBytes = 16 << 10 // a slot's, beyond which its buffers go with its entry
	keepBytes     = 1 << 20  // all free slots' together
)

// held is the memory a slot's buffers take.
func (s *slot) held() int64 { return int64(cap(s.mem)) + 16*int64(cap(s.argv)) }

// list is a doubly linked list of slots, oldest first.
type list struct{ head, tail int32 }

// Cache is the exec cache. It is not safe for concurrent use: one
// goroutine (the event drain) calls Observe.
type Cache struct {
	cfg          Config
	slots        []slot
	free         []int32
	byPid        pidtab.Table // pid -> slot + 1
	live, exited list
	// forked holds the live entries a fork made (sharing an image), which
	// go before the live entries of an exec when room is needed: the
	// image they share is their master's.
	forked list
	st     Stats
	// kept is the memory the free slots' buffers take (slot.mem).
	kept int64
	// parent is the slot the last parent lookup found (none at first): a
	// storm's events name the same parent over and over. It is only a
	// hint, checked against the slot's pid and token before use (a
	// dropped slot is zeroed).
	parent int32
	// images numbers the images stored (events.ExecInfo.Image).
	images uint64
}

// New returns an empty cache with cfg's bounds.
func New(cfg Config) *Cache {
	if cfg.Entries <= 0 {
		cfg.Entries = DefaultEntries
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = DefaultBytes
	}
	return &Cache{cfg: cfg, live: list{none, none}, exited: list{none, none}, forked: list{none, none}, parent: none}
}

// Stats returns the counters.
func (c *Cache) Stats() Stats { return c.st }

// Observe applies ev to the cache and sets ev.Parent. The Desc it points
// to is the cache's: valid until the next Observe.
//
// A fork gets its process's image as well, when the cache holds it: the
// one its parent ran at the fork, Exe, Argv and the argument and
// executable marks of ev.Exec, and when the fork stayed in the cgroup
// that image's exec was in, the cgroup path and container. An exit gets
// the executable its process ran when it ended (Exe and its marks), not
// the arguments: its fork or exec line, under the same token, has them,
// and an exit line that repeated them would double a feed's bytes for
// every process with a long command line. Never a working directory: a
// chdir is no event, and the one of the exec may no longer be the
// process's. The strings are the cache's, valid until the next Observe.
func (c *Cache) Observe(ev *events.Event) {
	ev.Parent, ev.KnownUIDOK = nil, false
	switch ev.Kind {
	case events.Lost:
		c.clear()
		return
	case events.Fork:
		if i, ok := c.slotOf(ev.Pid); ok {
			c.drop(i) // a new instance at the pid
		}
	case events.Exec:
		c.store(ev)
	case events.Exit:
		if i := c.find(ev.Pid, ev.Token); i != none {
			c.lend(ev, i)
			c.knownUID(ev, i)
			c.markExited(i)
		}
	}
	if ev.ParentToken.IsZero() {
		return
	}
	i := c.findParent(ev.PPid, ev.ParentToken)
	if i != none && ev.Kind == events.Fork && !ev.Inferred {
		if ev.Ctx.Valid {
			inherit(&c.slots[i].desc.Ctx, &ev.Ctx)
		}
		i = c.adopt(ev, i)
	}
	if i == none {
		c.st.Misses++
		return
	}
	if ev.Kind == events.Fork {
		c.knownUID(ev, i) // the child's ids are its parent's at the fork
	}
	ev.Parent = c.descOf(i)
	c.st.Hits++
}

// knownUID gives ev, when it carries no ids, the real uid entry i last
// knew (Event.KnownUID).
func (c *Cache) knownUID(ev *events.Event, i int32) {
	if x := &c.slots[i].desc.Ctx; !ev.Ctx.Has(events.CtxIDs) && x.Has(events.CtxIDs) {
		ev.KnownUID, ev.KnownUIDOK = x.UID, true
	}
}

// imageOf returns the slot holding the image of entry i and its gen;
// false when i shares one its slot no longer holds.
func (c *Cache) imageOf(i int32) (int32, uint64, bool) {
	s := &c.slots[i]
	if s.img == 0 {
		return i, s.gen, true
	}
	j := s.img - 1
	return j, s.imgGen, c.slots[j].gen == s.imgGen
}

// adopt gives the child ev forks an entry sharing the image of its
// parent's entry p, so that the child's own events and its children's
// can say what it runs, and lends that image to ev; it returns p. Such
// an entry costs no strings, and never the room of an exec's live entry:
// when the cache is full it takes the slot of the oldest exited entry,
// else of the oldest entry another fork made (never the parent's nor its
// image's), and when there is neither the child gets no entry.
func (c *Cache) adopt(ev *events.Event, p int32) int32 {
	img, gen, ok := c.imageOf(p)
	if !ok {
		return p
	}
	ic := &c.slots[img].desc.Ctx
	same := ev.Ctx.Has(events.CtxCgroup) && ic.Has(events.CtxCgroup) && ev.Ctx.CgroupID == ic.CgroupID
	c.lendFrom(ev, img, same)
	if ev.Token.IsZero() {
		return p
	}
	if c.st.Entries >= c.cfg.Entries {
		h := c.exited.head
		if h == none {
			h = c.forked.head // another fork's entry, the oldest
		}
		if h == none || h == p || h == img {
			return p
		}
	}
	i := c.alloc()
	c.byPid.Set(ev.Pid, uint32(i)+1)
	c.st.Entries++
	s := &c.slots[i]
	s.pid, s.tok, s.exited = ev.Pid, ev.Token, false
	s.img, s.imgGen = img+1, gen
	s.desc = events.Desc{Comm: ev.Comm, Ctx: ev.Ctx}
	s.sameCgroup = same
	// The buffers the slot kept are charged to it: they are for the
	// child's exec, which comes next in a storm. Exited entries make room
	// for them, and when none is left they go.
	for c.st.Bytes+s.held() > c.cfg.Bytes {
		if h := c.exited.head; h == none || h == p || h == img {
			s.mem, s.argv = nil, nil
			break
		}
		c.drop(c.exited.head)
		c.st.Evicted++
	}
	s.cost = s.held()
	c.st.Bytes += s.cost
	c.push(&c.forked, i)
	return p
}

// lend sets the exit ev's executable from entry i's image, when the
// cache still holds it (see Observe). An exit carries no ids: OtherIDs.
func (c *Cache) lend(ev *events.Event, i int32) {
	if j, _, ok := c.imageOf(i); ok {
		d := &c.slots[j].desc
		ev.Exe = d.Exe
		ev.Exec = events.ExecInfo{ExeTruncated: d.Exec.ExeTruncated, ExeDeleted: d.Exec.ExeDeleted, OtherIDs: true, Image: d.Exec.Image}
	}
}

// lendFrom sets ev's image from the one slot j holds, with its cgroup
// path and container when withCgroup.
func (c *Cache) lendFrom(ev *events.Event, j int32, withCgroup bool) {
	d := &c.slots[j].desc
	ev.Exe, ev.Argv = d.Exe, d.Argv
	ev.Exec = c.imageInfo(j, &ev.Ctx, withCgroup)
}

// imageInfo is what of the ExecInfo of the exec slot j holds describes its
// image (the arguments and the executable) and holds for a process
// running it later with the ids of ctx; with its cgroup path and
// container when withCgroup.
func (c *Cache) imageInfo(j int32, ctx *events.Context, withCgroup bool) events.ExecInfo {
	x := &c.slots[j].desc.Exec
	info := events.ExecInfo{ArgsCount: x.ArgsCount, ArgsSize: x.ArgsSize, ArgsTruncated: x.ArgsTruncated,
		ArgsRedacted: x.ArgsRedacted, ExeTruncated: x.ExeTruncated, ExeDeleted: x.ExeDeleted, Image: x.Image,
		OtherIDs: c.otherIDs(j, ctx)}
	if withCgroup {
		info.Cgroup, info.CgroupTruncated = x.Cgroup, x.CgroupTruncated
		info.ContainerID, info.ContainerRuntime = x.ContainerID, x.ContainerRuntime
	}
	return info
}

// descOf returns entry i's description. An entry made by a fork takes its
// image's executable and arguments now (or none, when the image's slot
// has moved on), with its own name and context.
func (c *Cache) descOf(i int32) *events.Desc {
	s := &c.slots[i]
	if s.img == 0 {
		s.desc.Exec.OtherIDs = c.otherIDs(i, &s.desc.Ctx) // its ids refreshed since
		return &s.desc
	}
	s.desc.Exe, s.desc.Argv, s.desc.Exec = "", nil, events.ExecInfo{}
	if j, _, ok := c.imageOf(i); ok {
		d := &c.slots[j].desc
		s.desc.Exe, s.desc.Argv = d.Exe, d.Argv
		s.desc.Exec = c.imageInfo(j, &s.desc.Ctx, s.sameCgroup)
	}
	return &s.desc
}

// Forget drops the entry of the exited instance (pid, tok), when there is
// one: the caller knows no later event can name it as parent (see
// lineage.Graph.Childless). An exec storm's children are thus not kept
// until evicted: their argument vectors, held for nothing, kept the heap
// large and the collector busy.
func (c *Cache) Forget(pid int32, tok token.Token) {
	if i := c.find(pid, tok); i != none && c.slots[i].exited {
		c.drop(i)
		c.st.Forgotten++
	}
}

// inherit refreshes a parent's context from its child's at the fork: what
// a child inherits from its creator is the creator's at that moment. The
// pid namespace, cgroup and namespace pid are the child's own, so a
// parent without a context gets none.
func inherit(p, child *events.Context) {
	if !p.Valid {
		return // its own parts (cgroup, namespace pid) are not known either
	}
	p.Absent = 0
	p.UID, p.EUID, p.SUID = child.UID, child.EUID, child.SUID
	p.GID, p.EGID, p.SGID = child.GID, child.EGID, child.SGID
	p.Groups, p.NGroups = child.Groups, child.NGroups
	p.Audit, p.LoginUID, p.AuditSession = child.Audit, child.LoginUID, child.AuditSession
	p.SID, p.PGID, p.SessionLeader, p.GroupLeader = child.SID, child.PGID, child.SessionLeader, child.GroupLeader
	p.TTY, p.StdTTY, p.TTYMajor, p.TTYMinor = child.TTY, child.StdTTY, child.TTYMajor, child.TTYMinor
}

// slotOf returns the slot held for pid.
func (c *Cache) slotOf(pid int32) (int32, bool) {
	v := c.byPid.Get(pid)
	return int32(v) - 1, v != 0
}

// find returns the slot of exactly (pid, tok), none when there is none.
func (c *Cache) find(pid int32, tok token.Token) int32 {
	if tok.IsZero() {
		return none
	}
	i, ok := c.slotOf(pid)
	if !ok || c.slots[i].tok != tok {
		return none
	}
	return i
}

// findParent is find with the last parent found tried first: the same
// answer, without the map lookup when the parent is the last one's.
func (c *Cache) findParent(pid int32, tok token.Token) int32 {
	if i := c.parent; i != none && int(i) < len(c.slots) && !tok.IsZero() &&
		c.slots[i].pid == pid && c.slots[i].tok == tok {
		return i
	}
	i := c.find(pid, tok)
	if i != none {
		c.parent = i
	}
	return i
}

// cost is what an exec's description is charged.
func cost(ev *events.Event) int64 {
	n := len(ev.Exe) + len(ev.Exec.Cwd) + len(ev.Exec.Cgroup) + 16*len(ev.Argv)
	for _, a := range ev.Argv {
		n += len(a)
	}
	return int64(n)
}

// store records ev's description under (pid, token), replacing the
// entry of the same instance and dropping another instance's.
func (c *Cache) store(ev *events.Event) {
	i, ok := c.slotOf(ev.Pid)
	if ok && c.slots[i].tok != ev.Token {
		c.drop(i)
		ok = false
	}
	n := cost(ev)
	if ev.Token.IsZero() || ev.Inferred || n > c.cfg.Bytes/16 {
		if n > c.cfg.Bytes/16 {
			c.st.TooBig++
		}
		if ok {
			c.drop(i)
		}
		return
	}
	if ok {
		// A re-exec of the same instance: the slot takes the new program
		// (and stops sharing one: its children's entries that shared
		// its image see the gen move on).
		s := &c.slots[i]
		c.st.Bytes -= s.cost
		c.unlink(i)
		s.gen++
		s.img, s.imgGen, s.sameCgroup = 0, 0, false
	} else {
		i = c.alloc()
		c.byPid.Set(ev.Pid, uint32(i)+1)
		c.st.Entries++
	}
	s := &c.slots[i]
	s.pid, s.tok, s.exited = ev.Pid, ev.Token, false
	c.images++
	ev.Exec.Image = c.images
	s.hold(ev)
	s.execIDs, s.execIDsOK = ids(&ev.Ctx)
	// Charged what the slot holds, which its buffers' reuse may make more
	// than the strings: Config.Bytes bounds the memory.
	s.cost = max(n, s.held())
	c.st.Bytes += s.cost
	c.st.Stored++
	c.push(&c.live, i)
	for c.st.Bytes > c.cfg.Bytes {
		if !c.evict(i) {
			break
		}
	}
}

// hold sets s.desc to ev's description, its strings and argument vector
// copied into s's buffers (grown when too small; never while a string
// points into them).
func (s *slot) hold(ev *events.Event) {
	x := &ev.Exec
	need := len(ev.Exe) + len(x.Cwd) + len(x.Cgroup) + len(x.ContainerID) + len(x.ContainerRuntime)
	for _, a := range ev.Argv {
		need += len(a)
	}
	if cap(s.mem) < need {
		s.mem = make([]byte, 0, need)
	}
	s.mem = s.mem[:0]
	s.desc = events.Desc{Comm: ev.Comm, Exe: s.copy(ev.Exe), Exec: ev.Exec, Ctx: ev.Ctx}
	d := &s.desc.Exec
	d.Cwd, d.Cgroup = s.copy(x.Cwd), s.copy(x.Cgroup)
	d.ContainerID, d.ContainerRuntime = s.copy(x.ContainerID), s.copy(x.ContainerRuntime)
	switch {
	case len(ev.Argv) == 0:
		s.desc.Argv = ev.Argv[:0:0] // nil or empty, as given; no element to copy
	default:
		if cap(s.argv) < len(ev.Argv) {
			s.argv = make([]string, len(ev.Argv))
		}
		s.argv = s.argv[:len(ev.Argv)]
		for i, a := range ev.Argv {
			s.argv[i] = s.copy(a)
		}
		s.desc.Argv = s.argv
	}
}

// copy appends str to s.mem, which has room for it, and returns the copy.
func (s *slot) copy(str string) string {
	if str == "" {
		return ""
	}
	n := len(s.mem)
	s.mem = append(s.mem, str...)
	return unsafe.String(&s.mem[n], len(str))
}

// alloc returns a free slot, evicting one when the cache is full.
func (c *Cache) alloc() int32 {
	if c.st.Entries >= c.cfg.Entries {
		c.evict(none)
	}
	if n := len(c.free); n > 0 {
		i := c.free[n-1]
		c.free = c.free[:n-1]
		c.kept -= c.slots[i].held()
		return i
	}
	c.slots = append(c.slots, slot{})
	return int32(len(c.slots) - 1)
}

// evict drops the oldest exited entry, else the oldest live one a fork
// made, else the oldest live one of an exec, other than keep, and reports
// whether there was one.
func (c *Cache) evict(keep int32) bool {
	i := c.exited.head
	for _, l := range []*list{&c.forked, &c.live} {
		if i != none {
			break
		}
		i = l.head
		if i != none && i == keep {
			i = c.slots[i].next
		}
	}
	if i == none {
		return false
	}
	c.drop(i)
	c.st.Evicted++
	return true
}

func (c *Cache) markExited(i int32) {
	if c.slots[i].exited {
		return
	}
	c.unlink(i)
	c.slots[i].exited = true
	c.push(&c.exited, i)
}

// drop forgets slot i. Its buffers stay for its next entry within the
// bounds (keepSlotBytes, keepBytes); their old strings are no one's: an
// entry lends them only for the event being observed.
func (c *Cache) drop(i int32) {
	s := &c.slots[i]
	c.unlink(i)
	c.byPid.Delete(s.pid)
	c.st.Bytes -= s.cost
	c.st.Entries--
	mem, argv, gen := s.mem, s.argv, s.gen
	*s = slot{gen: gen + 1} // the entries that shared its image see it gone
	if h := int64(cap(mem)) + 16*int64(cap(argv)); h <= keepSlotBytes && c.kept+h <= keepBytes {
		s.mem, s.argv = mem, argv
		c.kept += h
	}
	c.free = append(c.free, i)
}

func (c *Cache) clear() {
	c.st.Cleared++
	c.byPid.Clear()
	clear(c.slots)
	c.slots = c.slots[:0]
	c.kept = 0
	c.free = c.free[:0]
	c.live, c.exited, c.forked = list{none, none}, list{none, none}, list{none, none}
	c.st.Entries, c.st.Bytes = 0, 0
}

func (c *Cache) listOf(i int32) *list {
	switch s := &c.slots[i]; {
	case s.exited:
		return &c.exited
	case s.img != 0:
		return &c.forked
	}
	return &c.live
}

func (c *Cache) push(l *list, i int32) {
	s := &c.slots[i]
	s.prev, s.next = l.tail, none
	if l.tail != none {
		c.slots[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
}

func (c *Cache) unlink(i int32) {
	l, s := c.listOf(i), &c.slots[i]
	if s.prev != none {
		c.slots[s.prev].next = s.next
	} else {
		l.head = s.next
	}
	if s.next != none {
		c.slots[s.next].prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = none, none
}
