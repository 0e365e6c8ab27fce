package testenv

import (
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/token"
)

// Budget allows up to Max descriptors at a time (an actions.Budget for
// the tests of finders and teardowns).
type Budget struct {
	Max int

	mu   sync.Mutex
	used int
}

// Take implements actions.Budget.
func (b *Budget) Take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used >= b.Max {
		return false
	}
	b.used++
	return true
}

// Give implements actions.Budget.
func (b *Budget) Give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// InUse is how many are taken and not given back.
func (b *Budget) InUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// WithFDLimit runs f with this process's soft descriptor limit set to the
// descriptors open now plus room, then puts the limit back: whatever f
// opens past room fails with EMFILE.
func WithFDLimit(t testing.TB, room int, f func()) {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	tight := lim
	tight.Cur = uint64(len(ents) - 1 + room) // less the directory's own
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &tight); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// WithoutFDs runs f with this process's soft descriptor limit at 3, then
// puts the limit back: with 0, 1 and 2 taken, whatever f opens fails with
// EMFILE, wherever the descriptors open now leave gaps (WithFDLimit's room
// counts them).
func WithoutFDs(t testing.TB, f func()) {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	tight := lim
	tight.Cur = 3
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &tight); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// CheckBudgeted checks what a finder returned for a tree of kids under b
// (a budget of room): room members found and charged to b, every other
// child reported over the budget (the reason of actions.OverBudget) and
// nothing else unproven, and the finder's error saying so (spent:
// errors.Is(err, actions.ErrBudget)).
func (b *Budget) CheckBudgeted(t testing.TB, found int, unproven []token.Instance, spent bool, kids int) {
	t.Helper()
	if !spent {
		t.Error("the finder's error does not say the budget was spent")
	}
	over := 0
	for _, m := range unproven {
		if strings.Contains(m.Reason, "descriptors they may") {
			over++
		} else {
			t.Errorf("pid %d unproven: %s", m.Pid, m.Reason)
		}
	}
	if found != b.Max || over != kids-b.Max || b.InUse() != b.Max {
		t.Errorf("found %d, %d over the budget, %d charged; want %d, %d, %d", found, over, b.InUse(), b.Max, kids-b.Max, b.Max)
	}
}
