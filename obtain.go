package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// Obtain takes the lock on key for ttl and returns it, with a fresh random
// token and a fencing token (Lock.Fence) greater than any earlier grant's on
// this key. The TTL is rounded down to whole milliseconds.
//
// While the lock is held by someone else Obtain retries per WithRetry
// (default: no retry) and then returns ErrNotObtained, also matching
// ctx.Err() when ctx ended the wait (whichever call to Redis it cut short;
// a ctx that ends the first attempt, before the lock was found held, gives
// that attempt's error joined with ctx.Err()). A context without deadline bounds
// retries by WithMaxWait (default 30 s), a cap: no attempt starts after it,
// and the error is then a *WaitLimitError. An unreachable Redis,
// a Redis error reply or a lost quorum is returned as such (a *NodeError, a *QuorumError
// matching ErrNoQuorum), never as ErrNotObtained. Bad input is an error
// matching ErrInvalidArgument (an empty key, a TTL under 1 ms, leaving no
// validity after drift, or above MaxTTL), returned before any call to
// Redis.
//
// A grant is returned only while valid: ValidUntil = request start + TTL -
// (TTL * drift factor + 2ms), on the monotonic clock. Grants whose outcome is
// unknown (a timeout, a cut connection) are released in the background.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case key == "":
		return nil, invalid("empty key")
	case ctx == nil:
		return nil, invalid("nil context")
	}
	if _, err := o.checkCall(ttl); err != nil {
		return nil, err
	}
	req := request{c: c, key: key, keys: keys.New(o.prefix, key), opts: o, ttl: ttl, ttlArg: ttl.Milliseconds()}
	if o.fair {
		req.ticket = &ticket{id: rand.Text()} // this call's place in the fair queue (fair.go)
	}
	var attempts int
	if obs := c.obs; obs != nil {
		start := time.Now()
		ctx = obs.obtainStart(ctx, observe.ObtainStartEvent{Key: key, TTL: ttl})
		defer func() {
			obs.obtainDone(ctx, observe.ObtainDoneEvent{Key: key, TTL: ttl, Fence: l.Fence(), Attempts: attempts, Wait: time.Since(start), Err: err})
		}()
	}

	deadline := o.waitDeadline(ctx)
	// The wait state is made at the first wait; in fair mode at once, so
	// that every way out of Obtain leaves the queue.
	var ws *waitState
	defer func() { ws.stop() }()
	if o.fair {
		ws = c.obtainWaiter(req)
	}
	for attempts = 1; ; attempts++ {
		var l *Lock
		var err error
		if attempts > 1 {
			if err := deadline.Expired(); err != nil {
				return nil, err // no attempt starts after the wait limit
			}
		}
		if attempts == 1 && c.queueBehindLocalWaiters(&o, req.keys) || ws.behind() {
			// Other callers of this Client wait for this key, longer than
			// this one: wait behind them instead of overtaking them (a
			// release wakes or hands the lock to the longest-waiting one),
			// as if this attempt found the lock held.
			err = heldFor(req.keys, -1)
		} else {
			l, err = c.m.obtain(ctx, req)
		}
		switch {
		case err == nil:
			return c.deliver(ctx, l, attempts > 1)
		case ctx.Err() != nil:
			return nil, ended(ctx, key, attempts > 1, err)
		case !errors.Is(err, ErrNotObtained):
			return nil, err
		}
		// err matches ErrNotObtained, and may carry failing nodes' causes.
		wait, werr := o.nextWait(&deadline, attempts, err)
		if werr != nil {
			return nil, werr
		}
		// Wait for the backoff, a release (notified mode: see wait.go) or
		// the end of ctx.
		if ws == nil {
			ws = c.obtainWaiter(req)
		}
		if obs := c.obs; obs != nil && attempts == 1 {
			obs.waitStart(ctx, observe.WaitEvent{Key: key, Waiters: c.waiters(&o, req.keys)})
		}
		switch granted, err := ws.waitRetry(ctx, wait, err); {
		case granted:
			return c.deliver(ctx, ws.granted, true)
		case err != nil:
			return nil, err
		}
	}
}

// request is what one Obtain call asks for. Each attempt makes a Lock of
// it with a token of its own, so that the background release of an earlier
// attempt's unknown outcome can never delete a later attempt's grant.
type request struct {
	c      *Client
	key    string
	keys   keys.Lock
	opts   options
	ttl    time.Duration
	ttlArg any     // ttl in ms, boxed once for the script calls
	ticket *ticket // fair mode: the call's place in the queue
}

// errNoExpiry: the lock key holds a value that this library did not write
// (it writes every lock with a TTL); it would block the lock forever.
var errNoExpiry = errors.New("redislock: lock key holds a value without expiry, not written by redislock")

// errUnexpected: a script answered what no version of it sends.
var errUnexpected = errors.New("redislock: unexpected script reply")

// deliver returns l, granted to an Obtain call, unless the call's ctx
// ended meanwhile (a call whose ctx is done never returns a lock: a reply
// that came through go-redis' AutoPipeliner, which does not look at the
// ctx, or a handoff that raced the ctx's end); then l is given back in the
// background and the error is ended's (waited: the call had found the
// lock held).
func (c *Client) deliver(ctx context.Context, l *Lock, waited bool) (*Lock, error) {
	if ctx.Err() != nil {
		c.releaseLater(ctx, l, noObserver)
		return nil, ended(ctx, l.key, waited, nil)
	}
	return l, nil
}

// ended is the error of an Obtain or ObtainMulti call on key whose ctx
// ended before it could return a grant; err is its last attempt's error
// (nil: the attempt made a grant, which the caller gives back). Once the
// call has found the lock held (waited), the ctx ended its wait:
// contention, ErrNotObtained joined with the ctx's error, whatever call
// the ctx cut short. Before, the ctx cut short the first attempt, which
// reports its own error (for a grant, the call's), joined with the ctx's.
func ended(ctx context.Context, key string, waited bool, err error) error {
	switch {
	case waited:
		return lease.Join(ErrNotObtained, ctx.Err())
	case err == nil:
		return lease.Wrap(ctx.Err(), "obtain %q", key)
	}
	return lease.Join(err, ctx.Err())
}

// RunMulti is Run for a MultiLock: it obtains all keys with ObtainMulti,
// runs fn while renewing the whole set every WithRefreshInterval (default
// TTL/3), and releases the set when fn returns or panics. If a renewal
// finds any key gone, or renewals cannot get through before ValidUntil,
// fn's ctx is cancelled and RunMulti returns an error matching ErrLockLost,
// as Run does; a Release of the set while fn runs is ErrReleased, as for
// Run.
func (c *Client) RunMulti(ctx context.Context, keyList []string, ttl time.Duration, fn func(ctx context.Context, m *MultiLock) error, opts ...Option) error {
	if fn == nil {
		return invalid("nil fn")
	}
	interval, err := c.renewInterval(ttl, opts)
	if err != nil {
		return err
	}
	m, err := c.ObtainMulti(ctx, keyList, ttl, opts...)
	if err != nil {
		return err
	}
	return lease.RunLock(ctx, multiLease{m}, ttl, func(ctx context.Context) error { return fn(ctx, m) }, lease.WithRefreshInterval(interval))
}

// Run obtains the lock on key, runs fn while renewing the lease in the
// background, and releases the lock when fn returns.
//
// Renewal: every WithRefreshInterval (default TTL/3) the lease is extended
// by ttl. If a renewal finds the lock gone (expired, or taken by another
// holder), fn's ctx is cancelled at once. If renewals cannot get through
// (Redis paused, unreachable, a lost quorum), fn's ctx is cancelled at the
// last confirmed ValidUntil at the latest, by a timer that does not wait for
// any Redis call to return. In both cases Run returns an error matching
// ErrLockLost (and fn's own error if it failed); context.Cause of fn's ctx
// tells the reason: a cause matching ErrNotHeld, or ErrLeaseExpired with
// the last renewal's error.
//
// A Release of the lock while fn runs (fn, or another goroutine, called
// l.Release) gives it up early: fn's ctx is cancelled when that Release
// is called, with ErrReleased as its cause; Run does not release the lock
// again and returns an error matching ErrReleased (joined with fn's own
// error), not nil, since what fn did after the Release ran without the
// lock. An error of that Release is its caller's.
//
// If fn panics, the renewal stops and the lock is released before the panic
// goes on up the stack: a handler panic recovered by net/http does not leave
// the lock held until its TTL.
//
// fn must stop its work promptly when its ctx is done: after that another
// holder may own the lock. Obtain errors are returned as Obtain returns them
// and fn is not called.
//
// When fn returns, Run releases the lock and waits for the release, unless
// waiting cannot help: when the lock is already known lost (its validity
// has ended) or Redis is unreachable (the last call to the node, or to a
// majority of the nodes in quorum mode, did not get through). Then the
// release goes to the Client's background clean-up (Close waits for it;
// an unreachable Redis keeps the lock until its TTL) and Run returns at
// once. Apart from that clean-up no goroutine started by Run outlives it;
// a renewal call in flight is bounded by the renewal's own deadline (a
// call that a stalled Redis holds is left to go-redis).
func (c *Client) Run(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error, opts ...Option) error {
	if fn == nil {
		return invalid("nil fn")
	}
	interval, err := c.renewInterval(ttl, opts)
	if err != nil {
		return err
	}
	l, err := c.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	return lease.RunLock(ctx, newRunLock(l), ttl, func(ctx context.Context) error { return fn(ctx, l) }, lease.WithRefreshInterval(interval))
}

// runLock is a Lock as Run holds it: renewed by the Lock's Keep, noting
// the loss, and released without waiting when waiting cannot help.
type runLock struct {
	*Lock
	gone atomic.Bool // Keep reported the lock lost
}

func newRunLock(l *Lock) *runLock { return &runLock{Lock: l} }

// Keep is the Lock's Keep, noting the loss.
func (r *runLock) Keep(ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	return r.Lock.Keep(ttl, interval, func(cause error) {
		r.gone.Store(true)
		lost(cause)
	})
}

// Release releases the lock as Lock.Release does, or, when the lock is
// known lost or Redis unreachable, hands the release to the Client's
// background clean-up and returns at once: ErrNotHeld for a lost lock,
// nil otherwise (the outcome is not known).
func (r *runLock) Release(ctx context.Context) error {
	l := r.Lock
	lost := r.gone.Load() || !time.Now().Before(l.ValidUntil())
	if !lost && !l.c.unreachable() {
		return l.Release(ctx)
	}
	if l.endRelease(nil) {
		return ErrNotHeld
	}
	// The observers see the release when it is done, as Release's.
	ctx, done := l.beginRelease(ctx)
	l.c.releaseLater(ctx, l, done)
	if lost {
		return ErrNotHeld
	}
	return nil
}

// renewInterval checks Run's TTL and options and returns the renewal period.
func (c *Client) renewInterval(ttl time.Duration, opts []Option) (time.Duration, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return 0, err
	}
	return o.checkCall(ttl)
}

// deliver returns m, granted to an ObtainMulti call, unless the call's ctx
// ended meanwhile (as Client.deliver): then m is given back in the
// background and the error is ended's.
func (m *MultiLock) deliver(ctx context.Context, waited bool) (*MultiLock, error) {
	if ctx.Err() != nil {
		m.releaseLater(ctx, m.groups)
		return nil, ended(ctx, m.key(), waited, nil)
	}
	return m, nil
}
