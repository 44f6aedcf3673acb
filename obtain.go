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
		req.ticket = &ticket{id: rand.Text()} // this call's place in the fair queue (single.go)
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

func (r *request) newLock() *Lock {
	token := rand.Text()
	return &Lock{c: r.c, key: r.key, keys: r.keys, token: token, arg: token, ttlArg: r.ttlArg, opts: r.opts}
}

// errNoExpiry: the lock key holds a value that this library did not write
// (it writes every lock with a TTL); it would block the lock forever.
var errNoExpiry = errors.New("redislock: lock key holds a value without expiry, not written by redislock")

// errUnexpected: a script answered what no version of it sends.
var errUnexpected = errors.New("redislock: unexpected script reply")

// ticket is one fair Obtain call's identity in the queue, shared by all its
// attempts (their tokens differ). See the package guide, Fair locks.
type ticket struct {
	id     string
	queued atomic.Bool // an attempt may have put it in the queue
}

// markQueued notes that an attempt may have put this call's ticket in the
// fair queue, so that the call leaves the queue when it returns.
func (r *request) markQueued() {
	if r.ticket != nil {
		r.ticket.queued.Store(true)
	}
}

// deliver returns l, granted to an Obtain call, unless the call's ctx
// ended meanwhile (a call whose ctx is done never returns a lock: a reply
// that came through go-redis' AutoPipeliner, which does not look at the
// ctx, or a handoff that raced the ctx's end); then l is given back in the
// background and the error is ended's (waited: the call had found the
// lock held).
func (c *Client) deliver(ctx context.Context, l *Lock, waited bool) (*Lock, error) {
	if ctx.Err() != nil {
		c.giveBack(ctx, l)
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
