package daemon

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
)

// claimIndex is what the daemon keeps in memory of every stored claim, so
// that a request costs the same with 10 claims as with 10,000: owner and
// state for quotas, the root's instance for kill. A user's request reads
// that user's claims only (byUID, byShare), and a question about a pid the
// claims rooted there (byRoot); root's listings read them all. It follows the store:
// every write that lands updates it (Daemon.update, Launch, Admit, drop),
// and it is loaded from the store at start.
type claimIndex struct {
	mu   sync.RWMutex
	byID map[string]claimMeta
	// byMember is the claims that record a member at each pid (a
	// superset: find checks the store's record), so that a kill of a
	// member the graph no longer knows reads those claims only, not every
	// claim of the caller's (with 450 claims of 28 KB each, 81 ms of the
	// daemon's CPU per request, for a pid the caller held none of).
	byMember map[int32][]string
	// byUID, byShare and byRoot are byID's ids by uid, by the uid whose
	// quotas they count against, and by root pid. Before, every launch's
	// quota check, every batch of members recorded and every status read
	// all claims: with 30,000 in the index, 0.58 ms a request for a user
	// with none.
	byUID   map[uint32]idSet
	byShare map[uint32]idSet
	byRoot  map[int32]idSet
}

// idSet is a set of claim ids.
type idSet = map[string]struct{}

// link adds id to the set of k in m.
func link[K comparable](m map[K]idSet, k K, id string) {
	s := m[k]
	if s == nil {
		s = idSet{}
		m[k] = s
	}
	s[id] = struct{}{}
}

// unlink removes id from the set of k in m, and the set when emptied.
func unlink[K comparable](m map[K]idSet, k K, id string) {
	if s := m[k]; s != nil {
		delete(s, id)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

type claimMeta struct {
	kind   store.Kind
	uid    uint32
	share  uint32 // the uid whose quotas it counts against (claimShare)
	owner  string
	state  store.State
	pid    int32
	tok    token.Token
	bytes  int64
	failed bool // a launch that failed: kept within QuotaFailed
	at     time.Time
	// members is the pids of the members recorded, in byMember.
	members []int32
}

func newClaimIndex() *claimIndex {
	return &claimIndex{byID: map[string]claimMeta{}, byMember: map[int32][]string{},
		byUID: map[uint32]idSet{}, byShare: map[uint32]idSet{}, byRoot: map[int32]idSet{}}
}

// memberBytes is what one recorded member costs its claim's owner's
// byte quota.
const memberBytes = 128

// claimBytes is what a claim costs its owner's byte quota: its record as
// the store writes it (JSON, where a control character takes 6 bytes),
// with the store's page overhead, and memberBytes per member recorded.
// Before, the raw bytes of argv, cwd and owner were counted: three users
// each under a 16 MiB quota, their arguments control characters, filled
// the store's 256 MiB, and every launch failed, root's too.
func claimBytes(c *store.Claim) int64 {
	n, err := store.RecordSize(c)
	if err != nil {
		n = len(c.Cwd) + len(c.Owner)
		for _, a := range c.Argv {
			n += 6 * len(a)
		}
	}
	n += len(c.ID) + pageElement
	if n > storePage/2 {
		// A record too big to share a page has pages of its own.
		n = (n + storePage - 1) / storePage * storePage
	}
	return int64(n + memberBytes*len(c.Members))
}

// storePage and pageElement are the store's page size and its overhead per
// record in a page (bbolt's page and leaf element headers).
const (
	storePage   = 4096
	pageElement = 32
)

func (x *claimIndex) set(c *store.Claim) {
	failed := c.State == store.Released && c.Pid == 0 && c.LastVerdict != nil &&
		strings.HasPrefix(c.LastVerdict.Reason, launchFailed)
	x.mu.Lock()
	old, had := x.byID[c.ID]
	if had {
		x.unlinkKeys(c.ID, old)
	}
	m := claimMeta{kind: c.Kind, uid: c.UID, share: claimShare(c), owner: c.Owner, state: c.State, pid: c.Pid, tok: c.Token,
		bytes: claimBytes(c), failed: failed, at: c.UpdatedAt, members: old.members}
	x.byID[c.ID] = m
	link(x.byUID, m.uid, c.ID)
	link(x.byShare, m.share, c.ID)
	link(x.byRoot, m.pid, c.ID)
	x.mu.Unlock()
	x.resetMembers(c.ID, c.Members)
}

func (x *claimIndex) del(id string) {
	x.mu.Lock()
	x.dropMembers(id)
	if m, ok := x.byID[id]; ok {
		x.unlinkKeys(id, m)
	}
	delete(x.byID, id)
	x.mu.Unlock()
}

// unlinkKeys removes claim id, as m, from byUID, byShare and byRoot. x.mu
// is held.
func (x *claimIndex) unlinkKeys(id string, m claimMeta) {
	unlink(x.byUID, m.uid, id)
	unlink(x.byShare, m.share, id)
	unlink(x.byRoot, m.pid, id)
}

// linkMembers records pids as members of claim id. x.mu is held.
func (x *claimIndex) linkMembers(id string, pids []int32) {
	m, ok := x.byID[id]
	if !ok {
		return
	}
	for _, pid := range pids {
		if !slices.Contains(x.byMember[pid], id) {
			x.byMember[pid] = append(x.byMember[pid], id)
			m.members = append(m.members, pid)
		}
	}
	x.byID[id] = m
}

// dropMembers forgets every member pid of claim id. x.mu is held.
func (x *claimIndex) dropMembers(id string) {
	m, ok := x.byID[id]
	if !ok {
		return
	}
	for _, pid := range m.members {
		ids := slices.DeleteFunc(x.byMember[pid], func(s string) bool { return s == id })
		if len(ids) == 0 {
			delete(x.byMember, pid)
		} else {
			x.byMember[pid] = ids
		}
	}
	m.members = nil
	x.byID[id] = m
}

// memberClaims returns the open claims that record a member at pid: of
// uid, or of every uid when all.
func (x *claimIndex) memberClaims(pid int32, uid uint32, all bool) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []string
	for _, id := range x.byMember[pid] {
		if m, ok := x.byID[id]; ok && Open(m.state) && (all || m.uid == uid) {
			out = append(out, id)
		}
	}
	return out
}

// claimShare is the uid whose quotas and descriptors claim c counts
// against: its ShareUID, else its UID.
func claimShare(c *store.Claim) uint32 {
	if c.ShareUID != 0 {
		return c.ShareUID
	}
	return c.UID
}

// usage returns the open claims, stored bytes, and failed launches (oldest
// first) that count against uid's quotas (claimShare).
func (x *claimIndex) usage(uid uint32) (open int, bytes int64, failed []string) {
	type f struct {
		id string
		at time.Time
	}
	var fs []f
	x.mu.RLock()
	for id := range x.byShare[uid] {
		m := x.byID[id]
		bytes += m.bytes
		if Open(m.state) {
			open++
		}
		if m.failed {
			fs = append(fs, f{id, m.at})
		}
	}
	x.mu.RUnlock()
	slices.SortFunc(fs, func(a, b f) int { return a.at.Compare(b.at) })
	for _, e := range fs {
		failed = append(failed, e.id)
	}
	return open, bytes, failed
}

// countsOf returns, of the stored claims that count against uid's quotas
// (claimShare), how many there are by kind and state, in all, with how
// many members recorded (as the index knows them, from the store), and
// their bytes.
func (x *claimIndex) countsOf(uid uint32) (counts map[store.Kind]map[store.State]int, claims, members int, bytes int64) {
	counts = map[store.Kind]map[store.State]int{}
	x.mu.RLock()
	defer x.mu.RUnlock()
	for id := range x.byShare[uid] {
		m := x.byID[id]
		if counts[m.kind] == nil {
			counts[m.kind] = map[store.State]int{}
		}
		counts[m.kind][m.state]++
		claims++
		members += len(m.members)
		bytes += m.bytes
	}
	return counts, claims, members, bytes
}

// memberRoom returns how many of n members more fit the byte quota the
// claim id counts against (all for root's claims, or with no quota), and
// whose quota that is.
func (x *claimIndex) memberRoom(id string, n int, quota int64) (fit int, uid uint32) {
	x.mu.RLock()
	m, ok := x.byID[id]
	x.mu.RUnlock()
	if !ok || m.uid == 0 || quota <= 0 {
		return n, m.share
	}
	_, used, _ := x.usage(m.share)
	return int(min(int64(n), max(0, (quota-used)/memberBytes))), m.share
}

// addMembers counts n members recorded (forgotten when negative) on
// claim id in its bytes.
func (x *claimIndex) addMembers(id string, n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if m, ok := x.byID[id]; ok {
		m.bytes += int64(n) * memberBytes
		x.byID[id] = m
	}
}

// memberPids links the pids of members recorded on claim id.
func (x *claimIndex) memberPids(id string, pids []int32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.linkMembers(id, pids)
}

// resetMembers makes ms the members of claim id.
func (x *claimIndex) resetMembers(id string, ms []store.Member) {
	pids := make([]int32, len(ms))
	for i, m := range ms {
		pids[i] = m.Pid
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropMembers(id)
	x.linkMembers(id, pids)
}

// memberQuota is the daemon's store with each member recorded counted
// against its claim owner's byte quota (QuotaBytes), as claimBytes counts
// the members of a claim read from the store. The member writer added
// members the index never counted: a user's grant of 3,000 children took
// its uid past a 64 KiB quota and its next launch was still accepted; at
// 1,000 claims of 4,096 members one user could fill the store's 256 MiB
// and every user's writes failed. Of a batch past the quota, what fits
// is recorded and the rest refused (the writer counts it dropped): how
// much of the quota is left then does not depend on how the events were
// batched.
type memberQuota struct {
	claimStore
	x     *claimIndex
	quota int64
}

// AddMember implements claimStore.
func (s memberQuota) AddMember(id string, ms ...store.Member) (int, error) {
	fit, uid := s.x.memberRoom(id, len(ms), s.quota)
	added := 0
	if fit > 0 {
		var err error
		added, err = s.claimStore.AddMember(id, ms[:fit]...)
		s.x.addMembers(id, added)
		if added > 0 {
			pids := make([]int32, fit)
			for i, m := range ms[:fit] {
				pids[i] = m.Pid
			}
			s.x.memberPids(id, pids)
		}
		if err != nil {
			return added, err
		}
	}
	if fit < len(ms) {
		return added, fmt.Errorf("uid %d's claims reached their quota of %d bytes; %d members of %s not recorded: %w",
			uid, s.quota, len(ms)-fit, id, api.ErrQuota)
	}
	return added, nil
}

// RemoveMember implements claimStore: the members forgotten give their
// bytes back to the owner's quota.
func (s memberQuota) RemoveMember(id string, is ...store.Instance) (int, error) {
	removed, err := s.claimStore.RemoveMember(id, is...)
	s.x.addMembers(id, -removed)
	if removed > 0 {
		// A pid given may still be another recorded member's (a second
		// instance of it): the claim's pids are read again (a removal is
		// rare: a full claim's prune, a teardown's bookkeeping).
		if c, gerr := s.claimStore.Get(id); gerr == nil {
			s.x.resetMembers(id, c.Members)
		}
	}
	return removed, err
}

// openRoots returns the root tokens of the open claims whose root is at
// pid, by claim id.
func (x *claimIndex) openRoots(pid int32) map[string]token.Token {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out map[string]token.Token
	for id := range x.byRoot[pid] {
		if m := x.byID[id]; Open(m.state) {
			if out == nil {
				out = map[string]token.Token{}
			}
			out[id] = m.tok
		}
	}
	return out
}

// get returns what the index keeps of claim id.
func (x *claimIndex) get(id string) (claimMeta, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m, ok := x.byID[id]
	return m, ok
}

// has reports whether id is an open claim.
func (x *claimIndex) has(id string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m, ok := x.byID[id]
	return ok && Open(m.state)
}

// find returns the open claims whose root is (pid, tok), whoever's they
// are, and the ids of the open claims of uid (all uids when all).
func (x *claimIndex) find(pid int32, tok token.Token, uid uint32, all bool) (roots, mine []string) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for id := range x.byRoot[pid] {
		if m := x.byID[id]; Open(m.state) && sameInstance(m.tok, tok) {
			roots = append(roots, id)
		}
	}
	add := func(id string, m claimMeta) {
		if Open(m.state) {
			mine = append(mine, id)
		}
	}
	if all {
		for id, m := range x.byID {
			add(id, m)
		}
	} else {
		for id := range x.byUID[uid] {
			add(id, x.byID[id])
		}
	}
	return roots, mine
}

// page returns the ids of a page of claims matching q, in id order after
// q.After, and the cursor of the next page ("" on the last). uid, when not
// nil, restricts it to that uid's claims.
func (x *claimIndex) page(q api.ListQuery, uid *uint32) (ids []string, next string) {
	x.mu.RLock()
	keep := func(id string, m claimMeta) {
		switch {
		case id <= q.After && q.After != "",
			uid != nil && m.uid != *uid,
			q.UID != nil && m.uid != *q.UID,
			q.Owner != "" && m.owner != q.Owner,
			q.State != "" && string(m.state) != q.State:
			return
		}
		ids = append(ids, id)
	}
	switch {
	case uid != nil || q.UID != nil:
		of := q.UID
		if uid != nil {
			of = uid
		}
		for id := range x.byUID[*of] {
			keep(id, x.byID[id])
		}
	default:
		for id, m := range x.byID {
			keep(id, m)
		}
	}
	x.mu.RUnlock()
	slices.Sort(ids)
	if q.Limit > 0 && len(ids) > q.Limit {
		ids = ids[:q.Limit]
		next = ids[len(ids)-1]
	}
	return ids, next
}
