package daemon

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
)

// memberFDs bounds the pidfds the teardowns of uids but root hold for
// their members (one each, for a grace of up to an hour): a tenth of the
// daemon's descriptor limit for one uid, two fifths for all of them. A
// user's tree of as many processes as the limit, released with a long
// grace, otherwise took every descriptor, and every user's requests
// failed until it ended (accept, the store, /dev/null for a launch).
// Members beyond it are reported, not signalled (actions.Options.Budget).
type memberFDs struct {
	perUID, total int

	mu   sync.Mutex
	used map[uint32]int
	all  int
}

func newMemberFDs() *memberFDs {
	n := 1024
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) == nil {
		n = int(min(l.Cur, 1<<24))
	}
	return &memberFDs{perUID: n / 10, total: n * 2 / 5, used: map[uint32]int{}}
}

// forUID is uid's budget; root's teardowns have none.
func (m *memberFDs) forUID(uid uint32) actions.Budget {
	if uid == 0 {
		return nil
	}
	return uidFDs{m, uid}
}

type uidFDs struct {
	m   *memberFDs
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
