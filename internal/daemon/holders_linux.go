package daemon

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// holderWatch is the backstop of a holder's exit that depends on no event
// source: it holds one pidfd per holder process (grants sharing a holder
// share it) in an epoll set, and a pidfd turns readable when its process
// exits. A netlink source can lose the exit message; the pidfd cannot.
//
// Cost: one descriptor per distinct holder. 10,000 grants with 10,000
// distinct holders take 10,000 descriptors of the daemon's limit (Go
// raises the soft limit to the hard one at start: 20,000 on the test
// hosts, which root cannot raise). A holder that cannot be watched (no
// descriptor left, or its uid's share of them taken: fdBudget) is counted
// and left to the exit event and the periodic pass.
type holderWatch struct {
	ep     pidfd.Epoll // its wake-up ends run
	boot   procfs.BootID
	budget *fdBudget
	onExit func(pid int32, tok token.Token)

	mu      sync.Mutex
	byFd    map[int32]*watched
	byPid   map[int32]*watched
	failed  uint64
	stopped bool
}

type watched struct {
	h     *pidfd.Handle
	tok   token.Token
	share actions.Budget // the uid's budget its descriptor is charged to (nil: root's)
}

func newHolderWatch(boot procfs.BootID, budget *fdBudget, onExit func(pid int32, tok token.Token)) (*holderWatch, error) {
	ep, err := pidfd.NewEpoll()
	if err != nil {
		return nil, err
	}
	return &holderWatch{ep: ep, boot: boot, budget: budget, onExit: onExit,
		byFd: map[int32]*watched{}, byPid: map[int32]*watched{}}, nil
}

// add watches the holder (pid, tok) of a grant of uid, its descriptor
// charged to uid's share. A holder already gone, or whose pid now names
// another instance, is reported to onExit at once.
func (w *holderWatch) add(uid uint32, pid int32, tok token.Token) {
	w.mu.Lock()
	if cur, ok := w.byPid[pid]; ok && cur.tok == tok || w.stopped {
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	var share actions.Budget
	if w.budget != nil {
		share = w.budget.forUID(uid)
	}
	if share != nil && !share.Take() {
		w.mu.Lock()
		w.failed++
		w.mu.Unlock()
		return
	}
	kept := false
	defer func() {
		if !kept && share != nil {
			share.Give(1)
		}
	}()
	h, err := pidfd.Open(pid, w.boot)
	if err != nil {
		if errors.Is(err, pidfd.ErrGone) {
			w.onExit(pid, tok)
			return
		}
		w.mu.Lock()
		w.failed++
		w.mu.Unlock()
		return
	}
	if m, _ := token.Compare(tok, h.Token()); m != token.Same || h.Zombie() {
		h.Close()
		w.onExit(pid, tok)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.byPid[pid]; ok || w.stopped {
		h.Close()
		return
	}
	fd := int32(h.Fd())
	if err := unix.EpollCtl(w.ep.Fd, unix.EPOLL_CTL_ADD, int(fd), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: fd}); err != nil {
		h.Close()
		w.failed++
		return
	}
	kept = true
	x := &watched{h: h, tok: tok, share: share}
	w.byFd[fd] = x
	w.byPid[pid] = x
}

// remove stops watching the holder at pid.
func (w *holderWatch) remove(pid int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x, ok := w.byPid[pid]; ok {
		w.drop(x)
	}
}

func (w *holderWatch) drop(x *watched) {
	fd := int32(x.h.Fd())
	unix.EpollCtl(w.ep.Fd, unix.EPOLL_CTL_DEL, int(fd), nil)
	delete(w.byFd, fd)
	delete(w.byPid, x.h.Pid())
	x.h.Close()
	if x.share != nil {
		x.share.Give(1)
	}
}

// stats returns how many holders are watched and how many could not be.
func (w *holderWatch) stats() (watching int, failed uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byPid), w.failed
}

// run waits for holders to exit until stop; it forgets each exited
// holder and calls onExit for it, outside the lock.
func (w *holderWatch) run() {
	evs := make([]unix.EpollEvent, 64)
	type exit struct {
		pid int32
		tok token.Token
	}
	var exits []exit
	for {
		n, err := unix.EpollWait(w.ep.Fd, evs, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		exits = exits[:0]
		w.mu.Lock()
		for _, ev := range evs[:n] {
			if int(ev.Fd) == w.ep.WakeFd {
				w.mu.Unlock()
				return
			}
			if x, ok := w.byFd[ev.Fd]; ok {
				exits = append(exits, exit{x.h.Pid(), x.tok})
				w.drop(x)
			}
		}
		w.mu.Unlock()
		for _, e := range exits {
			w.onExit(e.pid, e.tok)
		}
	}
}

// stop ends run and closes every descriptor.
func (w *holderWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	for _, x := range w.byPid {
		w.drop(x)
	}
	w.mu.Unlock()
	w.ep.Wake()
}

// close releases the epoll set; call it after run has returned.
func (w *holderWatch) close() { w.ep.Close() }
