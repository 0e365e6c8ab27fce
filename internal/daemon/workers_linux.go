package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
)

// This file runs teardowns in workers the daemon owns. A teardown lasts
// its grace period (up to an hour): it never runs on the main loop, which
// must keep firing wall clocks, reaping children and answering SIGTERM,
// nor on a request's context, whose client may leave. A request that asks
// for a teardown waits for its worker, or not; either way the worker runs
// to its end. On stop the workers' context ends: a teardown sends nothing
// more, and its claim stays releasing for the next start to resume.

// worker is one teardown in progress.
type worker struct {
	done chan struct{}
	it   api.ReportItem
	out  actions.Outcome
	err  error
	// grace may end the teardown's grace early: a request joining it
	// with a shorter grace brings it forward (hurry).
	grace actions.GraceEnd

	mu       sync.Mutex
	steps    []string             // said so far, for a watcher that comes late
	watchers map[int]func(string) // requests waiting with a progress stream
	nextID   int
}

// maxSteps bounds the steps a worker keeps for late watchers.
const maxSteps = 16

// say tells every watcher a step of the teardown. Watchers do not block
// (api.ProgressOf).
func (w *worker) say(step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.steps) < maxSteps {
		w.steps = append(w.steps, step)
	}
	for _, f := range w.watchers {
		f(step)
	}
}

// watch tells f the steps said so far and every later one, until stop.
func (w *worker) watch(f func(string)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.steps {
		f(s)
	}
	if w.watchers == nil {
		w.watchers = map[int]func(string){}
	}
	id := w.nextID
	w.nextID++
	w.watchers[id] = f
	return func() {
		w.mu.Lock()
		delete(w.watchers, id)
		w.mu.Unlock()
	}
}

// workers tracks the teardowns in progress, one per claim at most.
type workers struct {
	ctx    context.Context // ends when the daemon stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[string]*worker
	perUID  map[uint32]int // the capped ones in progress, by the uid that asked
	capUID  int            // DefaultKillsPerUID
}

func newWorkers() *workers {
	ctx, cancel := context.WithCancel(context.Background())
	return &workers{ctx: ctx, cancel: cancel, running: map[string]*worker{}, perUID: map[uint32]int{}, capUID: DefaultKillsPerUID}
}

// count returns how many teardowns are in progress.
func (ws *workers) count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.running)
}

// get returns the teardown in progress for id, or nil.
func (ws *workers) get(id string) *worker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.running[id]
}

// start runs fn for id in a worker of its own and returns it; when a
// worker for id is already running, it returns that one and fn does not
// run (started is false). fn tells its steps to say.
func (ws *workers) start(id string, fn teardownFunc) (w *worker, started bool) {
	w, started, _ = ws.startFor(id, nil, fn)
	return w, started
}

// teardownFunc is a teardown a worker runs: say tells its steps, and
// grace is the worker's, for the teardown's Options.GraceEnd.
type teardownFunc func(ctx context.Context, say func(string), grace *actions.GraceEnd) (api.ReportItem, actions.Outcome, error)

// startFor is start for a teardown that uid asked for, when uid is not
// nil: a worker outlives its request and holds descriptors for its grace,
// so uid may have at most capUID of them in progress at once; past that
// it starts nothing and fails with api.ErrQuota. Joining the teardown in
// progress for id costs nothing and is never refused.
func (ws *workers) startFor(id string, uid *uint32, fn teardownFunc) (w *worker, started bool, err error) {
	ws.mu.Lock()
	if cur, ok := ws.running[id]; ok {
		ws.mu.Unlock()
		return cur, false, nil
	}
	if uid != nil {
		if n := ws.perUID[*uid]; n >= ws.capUID {
			ws.mu.Unlock()
			return nil, false, fmt.Errorf("uid %d has %d kills in progress (cap %d): %w", *uid, n, ws.capUID, api.ErrQuota)
		}
		ws.perUID[*uid]++
	}
	w = &worker{done: make(chan struct{})}
	ws.running[id] = w
	ws.mu.Unlock()
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		w.it, w.out, w.err = fn(ws.ctx, w.say, &w.grace)
		ws.mu.Lock()
		delete(ws.running, id)
		if uid != nil {
			if ws.perUID[*uid]--; ws.perUID[*uid] == 0 {
				delete(ws.perUID, *uid)
			}
		}
		ws.mu.Unlock()
		close(w.done)
	}()
	return w, true, nil
}

// hurry brings the end of w's grace forward to grace from now, when that
// is earlier than its end, and reports whether it did. A caller that may
// act on the claim and joins its teardown in progress with a shorter
// grace than the one running gets it: root's `release --grace 1s` of a
// user's job released with an hour's grace waited out the hour before.
func (w *worker) hurry(grace time.Duration) bool {
	return grace > 0 && w.grace.Shorten(time.Now().Add(grace))
}

// wait waits for w, or for ctx (the caller left; w goes on). A request
// that streams progress (api.ProgressOf) is told the steps meanwhile.
func (w *worker) wait(ctx context.Context) (api.ReportItem, *actions.Outcome, error) {
	if f := api.ProgressOf(ctx); f != nil {
		defer w.watch(f)()
	}
	select {
	case <-w.done:
		return w.it, &w.out, w.err
	case <-ctx.Done():
		return api.ReportItem{}, nil, ctx.Err()
	}
}

// stop ends every teardown's sending and waits for the workers.
func (ws *workers) stop() {
	ws.cancel()
	ws.wg.Wait()
}
