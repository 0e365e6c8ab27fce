package daemon

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
)

// fdBudget bounds the descriptors the daemon holds for uids but root: a
// share of its descriptor limit for one uid, a larger one for all of them.
// Two are kept:
//
//   - members: the pidfds teardowns hold for their members and their root
//     (one each, for a grace of up to an hour), a tenth for one uid and two
//     fifths for all.
//     A user's tree of as many processes as the limit, released with a
//     long grace, otherwise took every descriptor, and every user's
//     requests failed until it ended (accept, the store, /dev/null for a
//     launch). Members beyond it are reported, not signalled
//     (actions.Options.Budget).
//   - holders: the pidfds watching grants' holders (holderWatch), a
//     twentieth for one uid and a fifth for all. Each uid may hold
//     quota_claims grants, each with a holder of its own: 20 users at the
//     default 1,000 took all 20,000 descriptors. A holder beyond it is
//     left to its exit event and the periodic pass.
//
// Together they leave two fifths of the limit to root, the listener, the
// connections and the store.
type fdBudget struct {
	perUID, total int

	mu   sync.Mutex
	used map[uint32]int
	all  int
}

// fdLimit is the daemon's descriptor limit (the soft one, which Go raised
// to the hard one at start).
func fdLimit() int {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil {
		return 1024
	}
	return int(min(l.Cur, 1<<24))
}

func newMemberFDs(limit int) *fdBudget {
	return &fdBudget{perUID: limit / 10, total: limit * 2 / 5, used: map[uint32]int{}}
}

func newHolderFDs(limit int) *fdBudget {
	return &fdBudget{perUID: limit / 20, total: limit / 5, used: map[uint32]int{}}
}

// forUID is uid's budget; root has none.
func (m *fdBudget) forUID(uid uint32) actions.Budget {
	if uid == 0 {
		return nil
	}
	return uidFDs{m, uid}
}

type uidFDs struct {
	m   *fdBudget
	uid uint32
}

// Take implements actions.Budget.
func (u uidFDs) Take() bool {
	m := u.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used[u.uid] >= m.perUID || m.all >= m.total {
		return false
	}
	m.used[u.uid]++
	m.all++
	return true
}

// Give implements actions.Budget.
func (u uidFDs) Give(n int) {
	m := u.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.all -= n
	if m.used[u.uid] -= n; m.used[u.uid] <= 0 {
		delete(m.used, u.uid)
	}
}
