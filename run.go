package redislock

import (
	"context"
	"errors"
	"sync"
	"time"
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
// ErrLockLost (and, joined, fn's own error if it failed). context.Cause of
// fn's ctx tells the reason.
//
// fn must stop its work promptly when its ctx is done: after that another
// holder may own the lock. Obtain errors are returned as Obtain returns them
// and fn is not called. No goroutine started by Run outlives it, but Run
// waits for a renewal call in flight, which go-redis bounds by its
// ReadTimeout unless ContextTimeoutEnabled is set.
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
	return runHeld(ctx, l, ttl, interval, func(ctx context.Context) error { return fn(ctx, l) })
}

// renewInterval checks Run's TTL and options and returns the renewal period.
func (c *Client) renewInterval(ttl time.Duration, opts []Option) (time.Duration, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return 0, err
	}
	if err := o.checkTTL(ttl); err != nil {
		return 0, err
	}
	interval := o.refreshInterval
	if interval == 0 {
		interval = ttl / 3
	}
	if interval >= ttl-o.drift(ttl) {
		return 0, invalid("refresh interval %v leaves no time to renew a TTL of %v", interval, ttl)
	}
	return interval, nil
}

// held is what runHeld needs of a grant.
type held interface {
	Refresh(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
	ValidUntil() time.Time
}

// runHeld runs fn under the obtained grant h (a Lock or a MultiLock),
// renewing it every interval, and releases it afterwards. The watchdog
// cancels fn at the end of the confirmed validity, whatever the renewer is
// doing; a renewal that finds the grant gone cancels it at once. Other
// renewal errors (Redis unreachable, no quorum) are retried at the next tick.
func runHeld(ctx context.Context, h held, ttl, interval time.Duration, fn func(ctx context.Context) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(time.Until(h.ValidUntil()), func() {
		cancel(errors.Join(ErrLockLost, ErrGrantExpired))
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-fctx.Done():
				return
			case <-ticker.C:
			}
			err := h.Refresh(fctx, ttl)
			switch {
			case err == nil:
				watchdog.Reset(time.Until(h.ValidUntil()))
			case errors.Is(err, ErrNotHeld):
				cancel(errors.Join(ErrLockLost, err))
				return
			}
		}
	})

	fnErr := fn(fctx)
	close(stop)
	wg.Wait()
	watchdog.Stop()
	lost := context.Cause(fctx)
	if !errors.Is(lost, ErrLockLost) {
		lost = nil
	}
	cancel(nil)
	if err := h.Release(ctx); err != nil && lost == nil {
		if errors.Is(err, ErrNotHeld) {
			err = nil // expired after fn returned: fn ran under a valid lock
		}
		return errors.Join(fnErr, err)
	}
	return errors.Join(fnErr, lost)
}
