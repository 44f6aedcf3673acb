package nodes

import (
	"sync"
	"time"
)

// workerIdle is how long a worker waits for more work before it exits.
const workerIdle = time.Second

// Pool runs tasks on reused goroutines: a goroutine's stack, once grown by a
// call into go-redis, is kept for the next task (a fresh goroutine per node
// call spent about a fifth of a quorum Obtain+Release's CPU growing stacks).
// It holds at most max workers, never queues, and never blocks: TryGo
// refuses a task when every worker is busy. Its tasks must not wait for
// other tasks of the same pool.
type Pool struct {
	max  int
	work chan task // to an idle worker
	stop chan struct{}

	mu      sync.Mutex
	workers int  // guarded by mu
	closed  bool // guarded by mu
	stopped bool // guarded by mu
	wg      sync.WaitGroup
}

// NewPool returns a pool of at most max workers.
func NewPool(max int) *Pool {
	return &Pool{max: max, work: make(chan task), stop: make(chan struct{})}
}

// task is work for a worker: a func (funcTask), or a guarded call, which
// runs without a closure of its own.
type task interface{ run() }

// funcTask is a func as a task (a func value is stored in an interface as
// it is, without an allocation).
type funcTask func()

func (f funcTask) run() { f() }

// TryGo runs f on a worker and reports whether it did: an idle worker, or a
// new one while there are fewer than max. After Close it runs f on the
// caller's goroutine (and reports true); after Stop it refuses f.
func (p *Pool) TryGo(f func()) bool { return p.tryRun(funcTask(f)) }

// tryRun is TryGo for any task.
func (p *Pool) tryRun(t task) bool {
	select {
	case p.work <- t:
		return true
	default:
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		t.run()
		return true
	case p.stopped || p.workers >= p.max:
		p.mu.Unlock()
		return false
	}
	p.workers++
	p.wg.Add(1)
	p.mu.Unlock()
	go p.worker(t)
	return true
}

// worker runs t, then whatever work comes, until it has been idle for
// workerIdle or the pool is closed.
func (p *Pool) worker(t task) {
	defer func() {
		p.mu.Lock()
		p.workers--
		p.mu.Unlock()
		p.wg.Done()
	}()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		t.run()
		t = nil // not kept while idle
		idle.Reset(workerIdle)
		select {
		case t = <-p.work:
		case <-idle.C:
			return
		case <-p.stop:
			return
		}
	}
}

// Close makes idle workers exit and waits for the busy ones to finish their
// tasks; tasks given afterwards run on the caller's goroutine.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed && !p.stopped {
		close(p.stop)
	}
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// Stop makes idle workers exit, and busy ones once their task is done,
// without waiting for them; TryGo refuses every task afterwards.
func (p *Pool) Stop() {
	p.mu.Lock()
	if !p.closed && !p.stopped {
		close(p.stop)
	}
	p.stopped = true
	p.mu.Unlock()
}
