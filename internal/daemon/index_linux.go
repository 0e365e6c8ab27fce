package daemon

import (
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
// state for quotas, the root's instance for kill. It follows the store:
// every write that lands updates it (Daemon.update, Launch, Admit, drop),
// and it is loaded from the store at start.
type claimIndex struct {
	mu   sync.RWMutex
	byID map[string]claimMeta
}

type claimMeta struct {
	uid    uint32
	owner  string
	state  store.State
	pid    int32
	tok    token.Token
	bytes  int64
	failed bool // a launch that failed: kept within QuotaFailed
	at     time.Time
}

func newClaimIndex() *claimIndex { return &claimIndex{byID: map[string]claimMeta{}} }

// claimBytes is what a claim costs its owner's byte quota.
func claimBytes(c *store.Claim) int64 {
	n := len(c.Cwd) + len(c.Owner) + 128*len(c.Members)
	for _, a := range c.Argv {
		n += len(a)
	}
	return int64(n)
}

func (x *claimIndex) set(c *store.Claim) {
	failed := c.State == store.Released && c.Pid == 0 && c.LastVerdict != nil &&
		strings.HasPrefix(c.LastVerdict.Reason, launchFailed)
	x.mu.Lock()
	x.byID[c.ID] = claimMeta{uid: c.UID, owner: c.Owner, state: c.State, pid: c.Pid, tok: c.Token,
		bytes: claimBytes(c), failed: failed, at: c.UpdatedAt}
	x.mu.Unlock()
}

func (x *claimIndex) del(id string) {
	x.mu.Lock()
	delete(x.byID, id)
	x.mu.Unlock()
}

// usage returns uid's open claims, stored bytes, and failed launches
// (oldest first).
func (x *claimIndex) usage(uid uint32) (open int, bytes int64, failed []string) {
	type f struct {
		id string
		at time.Time
	}
	var fs []f
	x.mu.RLock()
	for id, m := range x.byID {
		if m.uid != uid {
			continue
		}
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
	for id, m := range x.byID {
		if !Open(m.state) {
			continue
		}
		if m.pid == pid && sameInstance(m.tok, tok) {
			roots = append(roots, id)
		}
		if all || m.uid == uid {
			mine = append(mine, id)
		}
	}
	return roots, mine
}

// page returns the ids of a page of claims matching q, in id order after
// q.After, and the cursor of the next page ("" on the last). uid, when not
// nil, restricts it to that uid's claims.
func (x *claimIndex) page(q api.ListQuery, uid *uint32) (ids []string, next string) {
	x.mu.RLock()
	for id, m := range x.byID {
		switch {
		case id <= q.After && q.After != "",
			uid != nil && m.uid != *uid,
			q.UID != nil && m.uid != *q.UID,
			q.Owner != "" && m.owner != q.Owner,
			q.State != "" && string(m.state) != q.State:
			continue
		}
		ids = append(ids, id)
	}
	x.mu.RUnlock()
	slices.Sort(ids)
	if q.Limit > 0 && len(ids) > q.Limit {
		ids = ids[:q.Limit]
		next = ids[len(ids)-1]
	}
	return ids, next
}
