package stampede

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// Fill computes the value of a key. Its ctx ends when the fill's lock is
// lost (its cause then matches lease.ErrLockLost), at the fill timeout, or
// when the Group is closed; it never ends because a caller gave up. A fill
// must return promptly once its ctx is done: its callers, and those that
// wait for it in other processes, are answered only when it returns. Return
// an error matching ErrMissing to report that the value does not exist.
type Fill func(ctx context.Context) ([]byte, error)

// Group fills cache entries at most once at a time across every process
// that shares its backend: a Locker for the fill locks and a Store for the
// values. Its methods are safe for concurrent use. Create it with New and
// end its background work with Close.
type Group struct {
	locker lease.Locker
	store  lease.Store
	o      options

	ctx    context.Context // parent of every flight and refresh; ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // flights and refreshes under way

	mu         sync.Mutex
	flights    map[string]*flight // guarded by mu: by the caller's key
	refreshing map[string]bool    // guarded by mu: keys with an early refresh under way
	closed     bool               // guarded by mu
}

// flight is one in-process pass over a key: the read, and on a miss the
// wait for the lock and the fill. Every Do for the key that arrives while
// it runs joins it.
type flight struct {
	key  string
	ttl  time.Duration
	fill Fill
	vals context.Context // the first caller's values, without its cancellation
	done chan struct{}   // closed when val and err are set

	val    []byte              // written once before done is closed
	err    error               // written once before done is closed
	result observe.CacheResult // written before done is closed: hit, filled, waited; "": an error

	cancel  context.CancelFunc // ends the flight (guarded by Group.mu once started)
	callers int                // guarded by Group.mu
	filling bool               // guarded by Group.mu: the fill began; callers that leave no longer end the flight
}

// New returns a Group that takes fill locks from locker and keeps values in
// store, which must belong to the same backend (redislock.Client.Locker and
// Client.Store, or leasetest.Memory for both). A nil locker or store, or an
// invalid option, is an error matching lease.ErrInvalidArgument.
func New(locker lease.Locker, store lease.Store, opts ...Option) (*Group, error) {
	if locker == nil || store == nil {
		return nil, lease.Invalid("stampede: nil Locker or Store")
	}
	o := defaults()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	g := &Group{locker: locker, store: store, o: o, flights: map[string]*flight{}, refreshing: map[string]bool{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g, nil
}

// Do returns the value of key: the cached one if there is one, else the one
// that fill computes. Across every process of the Group's backend, one
// caller at a time runs fill, under a lock on key renewed while it runs,
// and stores the value for ttl with the lock's fence; the other callers
// wait, woken when the filler releases the lock (the Locker's notified
// waiting; the cache is never polled), and return the stored value. Within
// a process, the callers of a key share one flight before any of them
// reaches the backend; the first caller's ttl and fill are used for all.
// The returned slice is shared by those callers and must not be modified.
//
// A fill that fails does not poison the cache: the callers that waited for
// it, here and in other processes, get its error (matching ErrFillFailed;
// see WithFillRetries to fill again instead), and the next Do fills again.
// A panic in fill is recovered, the lock released, and the callers get a
// *PanicError. The fill runs on a context of its own (with the first
// caller's values): a caller whose ctx ends returns at once with an error
// matching ctx.Err(), and the fill goes on for the others and the cache;
// the waiting for another process's fill ends when the last caller left.
//
// With WithNegativeTTL, a fill's ErrMissing is cached as such; with
// WithEarlyRefresh, a value near the end of its TTL is refreshed in the
// background by one process while the others keep reading it.
//
// An empty key, a ttl below 1 ms or not longer than the early refresh, or a
// nil fill is an error matching lease.ErrInvalidArgument; after Close, Do
// returns lease.ErrClosed. Backend errors (reads, locks) are returned as
// such.
func (g *Group) Do(ctx context.Context, key string, ttl time.Duration, fill Fill) ([]byte, error) {
	if err := g.check(key, ttl, fill); err != nil {
		return nil, err
	}
	if obs := g.o.cacheObservers; len(obs) > 0 {
		start := time.Now()
		f, val, err := g.do(ctx, key, ttl, fill)
		g.cacheDone(ctx, key, f, start, err)
		return val, err
	}
	_, val, err := g.do(ctx, key, ttl, fill)
	return val, err
}

// do is Do on valid arguments; it returns the flight that answered, nil
// when the caller left before it did.
func (g *Group) do(ctx context.Context, key string, ttl time.Duration, fill Fill) (*flight, []byte, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, lease.ErrClosed
	}
	f := g.flights[key]
	if f == nil {
		f = g.start(ctx, key, ttl, fill)
	}
	f.callers++
	g.mu.Unlock()
	g.hook(evJoin, key)
	select {
	case <-f.done:
		return f, f.val, f.err
	case <-ctx.Done():
		g.leave(f)
		return nil, nil, lease.Wrap(ctx.Err(), "stampede: %q", key)
	}
}

func (g *Group) check(key string, ttl time.Duration, fill Fill) error {
	switch {
	case key == "":
		return lease.Invalid("stampede: empty key")
	case ttl < time.Millisecond:
		return lease.Invalid("stampede: TTL %v is below 1ms", ttl)
	case g.o.earlyRefresh > 0 && g.o.earlyRefresh >= ttl:
		return lease.Invalid("stampede: early refresh %v is not shorter than the TTL %v", g.o.earlyRefresh, ttl)
	case fill == nil:
		return lease.Invalid("stampede: nil fill")
	}
	return nil
}

// start begins a flight for key. g.mu held.
func (g *Group) start(ctx context.Context, key string, ttl time.Duration, fill Fill) *flight {
	f := &flight{key: key, ttl: ttl, fill: fill, vals: context.WithoutCancel(ctx), done: make(chan struct{})}
	fctx, cancel := g.child(f.vals)
	f.cancel = cancel
	g.flights[key] = f
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer cancel()
		finished := false
		defer func() {
			if !finished { // fill called runtime.Goexit
				g.finish(f, nil, errGoexit)
			}
		}()
		val, err := g.run(fctx, f)
		finished = true
		g.finish(f, val, err)
	}()
	return f
}

// child returns a context with vals' values that Close ends.
func (g *Group) child(vals context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(vals)
	stop := context.AfterFunc(g.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// leave is called by a caller that gave up: the last one to leave ends a
// flight that is still waiting (not one that is filling).
func (g *Group) leave(f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.callers--
	if f.callers == 0 && !f.filling {
		f.cancel()
		if g.flights[f.key] == f {
			delete(g.flights, f.key)
		}
	}
}

// beginFill marks f as filling, unless every caller left.
func (g *Group) beginFill(f *flight) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.callers == 0 {
		return false
	}
	f.filling = true
	return true
}

func (g *Group) finish(f *flight, val []byte, err error) {
	f.val, f.err = val, err
	g.mu.Lock()
	if g.flights[f.key] == f {
		delete(g.flights, f.key)
	}
	g.mu.Unlock()
	close(f.done)
}

// run is the flight: the read, then on a miss the fill.
func (g *Group) run(ctx context.Context, f *flight) ([]byte, error) {
	k := lease.Key(g.o.namespace, f.key)
	rec, err := g.store.Get(ctx, k)
	switch {
	case err == nil:
		if val, err, ok := cached(f.key, rec); ok {
			if err == nil {
				g.maybeRefresh(f, rec)
			}
			f.result = observe.CacheHit
			return val, err
		}
	case !errors.Is(err, lease.ErrNotFound):
		return nil, g.backendErr(ctx, "read", f.key, err)
	}
	return g.fillCold(ctx, f)
}

// cached returns what a record stands for to a caller that did not wait
// for a fill: a value or a cached miss (ok), else nothing.
func cached(key string, rec lease.Record) (val []byte, err error, ok bool) {
	kind, payload, ok := decode(rec.Value)
	switch {
	case ok && kind == kindValue:
		return payload, nil, true
	case ok && kind == kindMissing:
		return nil, outcome(key, kind, payload, rec.Fence), true
	}
	return nil, nil, false
}

// backendErr wraps an error of the Locker or Store; after Close it also
// matches lease.ErrClosed.
func (g *Group) backendErr(ctx context.Context, op, key string, err error) error {
	err = lease.Wrap(err, "stampede: %s %q", op, key)
	if g.ctx.Err() != nil && ctx.Err() != nil {
		return lease.Join(lease.ErrClosed, err)
	}
	return err
}

// Close ends the Group's background work: it cancels the flights and
// refreshes under way (their callers get an error matching
// lease.ErrClosed; running fills see their ctx end) and waits for them to
// return. Later calls of Do return lease.ErrClosed. It never closes the
// Locker or the Store. Close is idempotent.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
	return nil
}

// Events reported to the test hook (options.hook, export_test.go).
const (
	evJoin   = "join"   // a caller joined a flight (or started it)
	evWait   = "wait"   // a flight waits for another holder of the lock
	evFill   = "fill"   // a flight or refresh begins its fill
	evStored = "stored" // a filled value was stored
)

// hook reports event on key to the Group's test hook, if any.
func (g *Group) hook(event, key string) {
	if g.o.hook != nil {
		g.o.hook(event, key)
	}
}
