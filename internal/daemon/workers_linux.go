package daemon

import (
	"context"
	"sync"

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
}

// workers tracks the teardowns in progress, one per claim at most.
type workers struct {
	ctx    context.Context // ends when the daemon stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[string]*worker
}

func newWorkers() *workers {
	ctx, cancel := context.WithCancel(context.Background())
	return &workers{ctx: ctx, cancel: cancel, running: map[string]*worker{}}
}

// get returns the teardown in progress for id, or nil.
func (ws *workers) get(id string) *worker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.running[id]
}

// start runs fn for id in a worker of its own and returns it; when a
// worker for id is already running, it returns that one and fn does not
// run (started is false).
func (ws *workers) start(id string, fn func(ctx context.Context) (api.ReportItem, actions.Outcome, error)) (w *worker, started bool) {
	ws.mu.Lock()
	if cur, ok := ws.running[id]; ok {
		ws.mu.Unlock()
		return cur, false
	}
	w = &worker{done: make(chan struct{})}
	ws.running[id] = w
	ws.mu.Unlock()
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		w.it, w.out, w.err = fn(ws.ctx)
		ws.mu.Lock()
		delete(ws.running, id)
		ws.mu.Unlock()
		close(w.done)
	}()
	return w, true
}

// wait waits for w, or for ctx (the caller left; w goes on).
func (w *worker) wait(ctx context.Context) (api.ReportItem, *actions.Outcome, error) {
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
