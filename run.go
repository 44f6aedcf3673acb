package redislock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redislock-go/redislock/lease"
)

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
// call that a stalled Redis holds is abandoned to go-redis).
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
	l.c.m.releaseLater(ctx, l, done)
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
