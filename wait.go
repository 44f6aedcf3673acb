package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// heldError is ErrNotObtained with what the failed attempt learned: the
// channel that will announce the release and the lock's remaining TTL.
type heldError struct {
	wake string        // the wake channel of the key that was held
	pttl time.Duration // remaining TTL of the holder's lease; < 0 if unknown
}

func (e *heldError) Error() string        { return ErrNotObtained.Error() }
func (e *heldError) Is(target error) bool { return target == ErrNotObtained }

// heldFor is the error of an attempt that found the lock held.
func heldFor(k keys.Lock, pttlMS int64) error {
	return &heldError{wake: k.Wake, pttl: time.Duration(pttlMS) * time.Millisecond}
}

// waitState is one Obtain call's waiting between attempts: notified (a
// release wakes it; see the package guide, Notified waiting) when the
// Client has a waker for it, else polling its backoff.
type waitState struct {
	c         *Client // nil: polling
	sharded   bool
	ticket    string                          // fair mode: this Obtain call's place in the queue
	req       *request                        // Obtain: what a handoff grants (handoff.go); nil: no handoffs
	retry     func(ctx context.Context) error // one more attempt (the recheck)
	granted   *Lock                           // Obtain: what the recheck obtained, or a handoff
	sub       *waitSub
	rechecked bool          // an attempt was made after sub was confirmed
	fairCap   time.Duration // fair mode: waits are capped to renew the queue entry
	leave     func()        // run by stop (fair mode: leave the queue)
}

func (c *Client) newWaitState(o *options, retry func(ctx context.Context) error, leave func()) *waitState {
	w := &waitState{retry: retry, sharded: c.sharded(o.sharded), leave: leave}
	if o.fair {
		w.fairCap = o.queueTTL / 3
	}
	if o.notify {
		w.c = c
	}
	return w
}

// obtainWaiter is the wait state of one Client.Obtain call: its recheck
// keeps the Lock it obtains in granted. It takes a copy of the request, so
// that an Obtain that never waits keeps its own on the stack.
func (c *Client) obtainWaiter(req request) *waitState {
	r := &req
	w := c.newWaitState(&r.opts, nil, c.fairLeave(r))
	switch {
	case r.ticket != nil:
		w.ticket = r.ticket.id
	case r.opts.replicas == 0: // a handoff would skip the WAIT (WithReplicas)
		w.req = r
	}
	w.retry = func(ctx context.Context) (err error) {
		w.granted, err = c.m.obtain(ctx, *r)
		return err
	}
	return w
}

// errGranted: the recheck made right after subscribing obtained the lock, or
// a release handed it over.
var errGranted = errors.New("redislock: granted during wait")

// handedOver reports whether a release handed this waiter a lock that is
// still valid, and keeps it in granted. One that expired before the waiter
// took it is given back.
func (w *waitState) handedOver() bool {
	if w.sub != nil {
		if l, ok := w.sub.Take(); ok {
			if time.Now().Before(l.validUntil()) {
				w.granted = l
			} else {
				l.c.releaseLater(context.Background(), l, noObserver)
			}
		}
	}
	return w.granted != nil
}

// wait waits before the next attempt, after an attempt failed with held (an
// error matching ErrNotObtained). It returns nil to try again, errGranted if
// its own recheck obtained the lock or a release handed it over, or the
// error that ends Obtain (the context's, joined with ErrNotObtained, or the
// recheck's).
func (w *waitState) wait(ctx context.Context, wait time.Duration, held error) error {
	if w.handedOver() {
		return errGranted
	}
	if w.fairCap > 0 {
		wait = min(wait, w.fairCap)
	}
	var he *heldError
	if !errors.As(held, &he) || w.c == nil {
		return sleep(ctx, wait, nil)
	}
	if he.pttl >= 0 {
		// Expiry publishes nothing: wake just after it.
		wait = min(wait, he.pttl+time.Millisecond)
	}
	if w.sub == nil || w.sub.Channel() != he.wake {
		w.leaveSub() // ObtainMulti: another key was found held
		w.sub = w.c.subscribe(he.wake, w.ticket, w.req, w.sharded)
		if w.sub == nil {
			return sleep(ctx, wait, nil)
		}
		// When the channel was already subscribed for other waiters of
		// this client, a release since our attempt woke one of them, who
		// tries: no recheck is needed. (Not in fair mode: the release may
		// have been meant for this waiter, the queue's head.) A local
		// waker subscribes nothing, so it misses nothing.
		w.rechecked = (w.sub.Joined() && w.fairCap == 0) || w.sub.Local()
	} else if w.sub.Resubscribed() {
		w.rechecked = false // a new connection: recheck once it confirms
	}
	if !w.rechecked {
		start := time.Now()
		if ok, err := w.sub.Confirmed(ctx, wait); err != nil {
			return lease.Join(ErrNotObtained, err)
		} else if !ok || time.Since(start) >= wait {
			// The wait ended before Redis confirmed the subscription:
			// the next attempt is due anyway, if the wait limit lets
			// it start (the caller's loop asks).
			return nil
		}
		if w.handedOver() {
			return errGranted
		}
		// Subscribed: try again at once, so that a release that happened
		// before the subscription is not missed.
		w.rechecked = true
		err := w.retry(ctx)
		switch {
		case err == nil:
			return errGranted
		case !errors.Is(err, ErrNotObtained):
			return err
		}
		wait -= time.Since(start)
		if errors.As(err, &he) && he.pttl >= 0 {
			wait = min(wait, he.pttl+time.Millisecond)
		}
		if wait <= 0 {
			return nil
		}
	}
	if err := sleep(ctx, wait, w.sub.Wake()); err != nil {
		return err
	}
	if w.handedOver() {
		return errGranted
	}
	return nil
}

// waitRetry waits as wait does and reports its outcome as Obtain returns it:
// granted, or the error that ends the call (one that is not contention is
// joined with the ctx error that ended the wait), or neither: try again.
func (w *waitState) waitRetry(ctx context.Context, wait time.Duration, held error) (granted bool, err error) {
	switch err := w.wait(ctx, wait, held); {
	case err == errGranted:
		return true, nil
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The ctx ended the wait, in a recheck's call: still contention.
		return false, lease.Join(ErrNotObtained, ctx.Err())
	case err != nil && !errors.Is(err, ErrNotObtained) && ctx.Err() != nil:
		return false, lease.Join(err, ctx.Err())
	default:
		return false, err
	}
}

// behind reports whether another caller of the Client has waited longer for
// the same key (notified, not fair, not sharded): the longest-waiting caller
// makes the attempts for all of them, the others wait for a release to wake
// them or hand them the lock.
func (w *waitState) behind() bool {
	if w == nil || w.sub == nil || w.fairCap > 0 || w.sharded {
		return false
	}
	return w.sub.Behind()
}

// stop leaves the subscription, if any, and the fair queue. A lock handed to
// the waiter and not taken is given back.
func (w *waitState) stop() {
	if w == nil {
		return
	}
	w.leaveSub()
	if w.leave != nil {
		w.leave()
	}
}

// leaveSub leaves the subscription, if any, giving back a lock handed to
// the waiter and not taken.
func (w *waitState) leaveSub() {
	if w.sub != nil {
		if l, ok := w.sub.Stop(); ok {
			l.c.releaseLater(context.Background(), l, noObserver)
		}
		w.sub = nil
	}
}

var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// sleep waits d, or until wake receives (nil channel: never) or ctx ends.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := timerPool.Get().(*time.Timer)
	t.Reset(d)
	defer func() {
		t.Stop()
		timerPool.Put(t)
	}()
	select {
	case <-ctx.Done():
		return lease.Join(ErrNotObtained, ctx.Err())
	case <-t.C:
	case <-wake:
	}
	return nil
}

// waitDeadline starts the wait of an Obtain (backend.WaitDeadline): ctx's
// deadline, else WithMaxWait (default DefaultMaxWait), a cap.
func (o *options) waitDeadline(ctx context.Context) backend.WaitDeadline {
	limit := o.maxWait
	if limit == 0 {
		limit = DefaultMaxWait
	}
	return backend.NewWaitDeadline(ctx, limit)
}

// nextWait is how long to wait after the attempt-th attempt failed with
// held, or the error that ends the call (backend.WaitDeadline.Next).
func (o *options) nextWait(d *backend.WaitDeadline, attempt int, held error) (time.Duration, error) {
	backoff, ok := o.retry.Backoff(attempt)
	return d.Next(backoff, ok, held, seenTTL(held))
}

// seenTTL is the holder's remaining lease that a failed attempt reported,
// negative if unknown.
func seenTTL(err error) time.Duration {
	var he *heldError
	if errors.As(err, &he) {
		return he.pttl
	}
	return -1
}

// WaitLimitError is lease.WaitLimitError: an Obtain (or ObtainMulti)
// that stopped waiting for a held lock because its wait limit passed.
type WaitLimitError = lease.WaitLimitError

// A RetryStrategy decides whether and how long Obtain waits before trying a
// contended lock again. attempt counts the failed tries so far (1 after the
// first). Implementations must be stateless values: one strategy is shared
// by every call and goroutine that uses it. It is lease.RetryStrategy, so
// one strategy serves every backend.
type RetryStrategy = lease.RetryStrategy

// NoRetry tries once. It is the default.
func NoRetry() RetryStrategy { return lease.NoRetry() }

// LinearBackoff waits d between tries, until the context (or WithMaxWait)
// ends. d must be positive.
func LinearBackoff(d time.Duration) RetryStrategy { return lease.LinearBackoff(d) }

// ExponentialBackoff waits a random time between min and a ceiling that
// starts at min and doubles with every failed try, up to max (full jitter,
// so that waiters woken together spread out). It needs 0 < min <= max.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return lease.ExponentialBackoff(min, max)
}

// LimitRetry allows at most max retries (max+1 tries in all) of s.
func LimitRetry(s RetryStrategy, max int) RetryStrategy { return lease.LimitRetry(s, max) }

// sharded reports whether waiting uses sharded pub/sub when a call asks
// for it (single mode only).
func (c *Client) sharded(asked bool) bool { return asked && c.single != nil }

// publish is how releases with o wake waiters: quorum mode has no pub/sub.
func (c *Client) publish(o *options) script.Publish {
	if c.single == nil {
		return script.PublishNone
	}
	return c.single.publish(o)
}
