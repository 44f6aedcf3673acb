package nodes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A call's bound where go-redis would not keep it. go-redis applies a
// context's deadline to the socket only with ContextTimeoutEnabled, and
// its AutoPipeliner sends batched calls on a context of its own: such a
// call to a server that accepts and never answers lasts until go-redis'
// ReadTimeout (or for ever, without one). Those calls run on a worker
// while the caller waits for them only until its context ends or the
// call's timeout passes, whichever comes first. A call the caller stopped
// waiting for is abandoned to go-redis: it goes on on its worker until
// go-redis returns, and then its settle function settles what it may have
// done (a grant to release).

// MaxAbandoned is how many abandoned calls one node may have before a
// further guarded call waits for one of them to end (at most until its ctx
// ends or its timeout passes; then it is not sent). Abandoned calls are
// work the node still has to do: they hold back new calls instead of
// piling up on a slow or stalled node, each new one keeping a goroutine
// until go-redis returns it. A settle's calls never wait (the call it
// settles counts).
const MaxAbandoned = 16

// MaxGuardWorkers is how many workers of a node's guarded calls it keeps,
// their stacks grown by go-redis calls, for the next calls; calls beyond
// it get goroutines of their own.
const MaxGuardWorkers = 256

// ErrAbandoned is matched by the error of a call whose caller stopped
// waiting for it (its context ended, or its timeout passed): the call goes
// on in the background, and its settle function runs when it returns. The
// error also matches the cause, the context's error or
// context.DeadlineExceeded.
var ErrAbandoned = errors.New("redislock: stopped waiting for the node")

// settling marks the context of a settle: its calls do not wait for the
// node's abandoned calls (among them the one it settles).
type settling struct{}

// bounded marks a context that cannot end whose calls are bounded all the
// same (Bounded).
type bounded struct{}

// Bounded returns ctx marked so that calls on it are guarded, bounded by
// their timeout, though ctx cannot end: for background work (clean-up,
// fan-out calls, settles) and for releases on behalf of a caller whose ctx
// could end. A call on a context that cannot end and is not marked
// (context.Background(), the caller's choice) is left to go-redis' own
// timeouts, at no cost.
func Bounded(ctx context.Context) context.Context {
	if ctx.Value(bounded{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, bounded{}, true)
}

// Detach returns ctx without its cancellation and deadline, its values
// kept (context.WithoutCancel), marked Bounded: in one allocation, for
// the release of a caller whose ctx could end.
func Detach(ctx context.Context) context.Context { return detached{ctx} }

// detached is Detach's context.
type detached struct{ parent context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }

func (d detached) Value(key any) any {
	if _, ok := key.(bounded); ok {
		return true
	}
	return context.WithoutCancel(d.parent).Value(key) // the parent's values, not its cancellation
}

func (d detached) String() string { return fmt.Sprint(d.parent) + ".WithoutCancel.Bounded" }

// errNotSent is matched by the error of a call that never reached go-redis
// because its context had already ended.
var errNotSent = errors.New("redislock: not sent")

// NotSent reports whether err is the error of a call that never went out:
// its context had ended before it (the error matches the context's), or
// its node refused it (ErrBusy). Nothing needs to be settled after it.
func NotSent(err error) bool { return errors.Is(err, errNotSent) || errors.Is(err, ErrBusy) }

// IsLate reports whether err is the error of a late (abandoned) call
// (ErrAbandoned): its late function settles it.
func IsLate(err error) bool { return errors.Is(err, ErrAbandoned) }

// NoOutcome reports whether a failed call's outcome is not its caller's
// to handle: the call never went out (NotSent), or it still runs, and its
// onLate (Call's settle, an Op's OnLate) gets its outcome once it returns
// (IsLate).
func NoOutcome(err error) bool { return NotSent(err) || IsLate(err) }

// callError is the error of a call not sent, or abandoned: its message is
// the cause's.
type callError struct {
	cause, kind error
}

func (e *callError) Error() string   { return e.cause.Error() }
func (e *callError) Unwrap() []error { return []error{e.cause, e.kind} }

// Guarded calls' states.
const (
	running int32 = iota
	finished
	abandoned
)

// guarded is one guarded call, reused: the call itself (an Op, or f and
// settle) and what its worker needs, so that a guarded call costs no
// closure of its own.
type guarded struct {
	state atomic.Int32
	done  chan error // buffered: the worker never waits for the caller

	ctx    context.Context
	rdb    redis.Scripter
	op     Op // or f and settle
	f      func(ctx context.Context, rdb redis.Scripter) error
	settle func(ctx context.Context, err error)
	n      *Node    // nil: no node's call (Once)
	count  *Guarded // nil: abandoned calls not counted
}

var guards = sync.Pool{New: func() any { return &guarded{done: make(chan error, 1)} }}

// put clears g and gives it back to guards.
func (g *guarded) put() {
	g.ctx, g.rdb, g.op, g.f, g.settle, g.n, g.count = nil, nil, nil, nil, nil, nil, nil
	guards.Put(g)
}

// run is the call on its worker.
func (g *guarded) run() {
	var err error
	if g.op != nil {
		err = g.op.Run(g.ctx, g.rdb)
	} else {
		err = g.f(g.ctx, g.rdb)
	}
	if n := g.n; n != nil {
		n.inflight.Add(-1)
		n.noteReached(err)
	}
	if g.state.CompareAndSwap(running, finished) {
		g.done <- err // the caller now owns g
		return
	}
	// The caller stopped waiting: this goroutine settles the call.
	sctx := Bounded(context.WithValue(context.WithoutCancel(g.ctx), settling{}, true))
	switch {
	case g.op != nil:
		g.op.OnLate(sctx, err)
	case g.settle != nil:
		g.settle(sctx, err)
	}
	if g.count != nil {
		g.count.settled()
	}
	g.put()
}

// Guarded is what a node knows of its guarded calls: the abandoned ones,
// which hold back new calls (MaxAbandoned) and which Close waits for,
// within a bound.
type Guarded struct {
	abandoned atomic.Int32 // abandoned calls not yet returned and settled
	mu        sync.Mutex
	room      chan struct{} // guarded by mu: closed when abandoned drops below MaxAbandoned; nil when no one waits
	idle      chan struct{} // guarded by mu: closed when abandoned drops to 0; nil when no one waits
}

// wait waits while the node has MaxAbandoned abandoned calls, at most
// until ctx ends or timeout passes (0: ctx alone bounds it).
func (g *Guarded) wait(ctx context.Context, timeout time.Duration) error {
	var timeoutC <-chan time.Time
	for g.abandoned.Load() >= MaxAbandoned {
		g.mu.Lock()
		if g.abandoned.Load() < MaxAbandoned {
			g.mu.Unlock()
			break
		}
		if g.room == nil {
			g.room = make(chan struct{})
		}
		room := g.room
		g.mu.Unlock()
		if timeoutC == nil && timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			timeoutC = t.C
		}
		select {
		case <-room:
		case <-ctx.Done():
			return &callError{cause: ctx.Err(), kind: errNotSent}
		case <-timeoutC:
			return &callError{cause: context.DeadlineExceeded, kind: errNotSent}
		}
	}
	return nil
}

func (g *Guarded) abandon() { g.abandoned.Add(1) }

// Abandoned reports how many abandoned calls have not yet returned and
// been settled.
func (g *Guarded) Abandoned() int { return int(g.abandoned.Load()) }

func (g *Guarded) settled() {
	n := g.abandoned.Add(-1)
	if n >= MaxAbandoned {
		return
	}
	g.mu.Lock()
	if g.room != nil {
		close(g.room)
		g.room = nil
	}
	if n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
}

// Wait waits until every abandoned call has returned and been settled, or
// until deadline, and reports whether they all had.
func (g *Guarded) Wait(deadline time.Time) bool {
	g.mu.Lock()
	if g.abandoned.Load() == 0 {
		g.mu.Unlock()
		return true
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// guard runs g (its call set) on a worker of workers (nil, or none free:
// a goroutine of its own) and waits for it until g.ctx ends or timeout
// passes (0: the ctx alone bounds it), returning the call's error, or an
// error matching ErrAbandoned and the cause (ctx.Err() or
// context.DeadlineExceeded) when it stopped waiting. An abandoned call goes
// on; when it returns, its settle runs on its goroutine, with a ctx: g.ctx
// without its cancellation, marked as a settle's. g.count, if not nil,
// counts the node's abandoned calls until they are settled.
func guard(g *guarded, workers *Pool, timeout time.Duration) error {
	ctx, count := g.ctx, g.count
	g.state.Store(running)
	if workers == nil || !workers.tryRun(g) {
		go g.run()
	}
	var timeoutC <-chan time.Time
	if timeout > 0 {
		t := timers.Get().(*time.Timer)
		t.Reset(timeout)
		defer func() {
			t.Stop()
			timers.Put(t)
		}()
		timeoutC = t.C
	}
	var cause error
	select {
	case err := <-g.done:
		g.put()
		return err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timeoutC:
		cause = context.DeadlineExceeded
	}
	if count != nil {
		count.abandon() // before the call can be seen abandoned
	}
	if !g.state.CompareAndSwap(running, abandoned) {
		// The call returned meanwhile: its result stands.
		if count != nil {
			count.settled()
		}
		err := <-g.done
		g.put()
		return err
	}
	return &callError{cause: cause, kind: ErrAbandoned}
}

// Once runs f, a call on rdb, a go-redis client of the caller's that is
// no Node's (FencedSet, FencedGet), bounded by ctx as Node.Call bounds a
// call: not sent when ctx has already ended; guarded (nothing to settle)
// when go-redis would not apply ctx's deadline.
func Once(ctx context.Context, rdb any, f func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return &callError{cause: err, kind: errNotSent}
	}
	if honours(rdb) || ctx.Done() == nil {
		return f(ctx)
	}
	g := guards.Get().(*guarded)
	g.ctx, g.f = ctx, func(ctx context.Context, _ redis.Scripter) error { return f(ctx) }
	return guard(g, nil, 0)
}

// honours reports whether go-redis applies context deadlines to the
// sockets of rdb (ContextTimeoutEnabled). A client of another type is
// taken at its word.
func honours(rdb any) bool {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return r.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return r.Options().ContextTimeoutEnabled
	}
	return true
}
