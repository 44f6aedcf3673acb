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
	o, err := c.callOptions(opts)
	if err != nil {
		return err
	}
	if err := o.checkTTL(ttl); err != nil {
		return err
	}
	interval := o.refreshInterval
	if interval == 0 {
		interval = ttl / 3
	}
	if interval >= ttl-o.drift(ttl) {
		return invalid("refresh interval %v leaves no time to renew a TTL of %v", interval, ttl)
	}
	l, err := c.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}

	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The watchdog cancels fn at the end of the confirmed validity, whatever
	// the renewer is doing.
	watchdog := time.AfterFunc(time.Until(l.ValidUntil()), func() {
		cancel(errors.Join(ErrLockLost, ErrGrantExpired))
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.renew(fctx, stop, ttl, interval, watchdog, cancel)
	}()

	fnErr := fn(fctx, l)
	close(stop)
	wg.Wait()
	watchdog.Stop()
	lost := context.Cause(fctx)
	if !errors.Is(lost, ErrLockLost) {
		lost = nil
	}
	cancel(nil)
	if err := l.Release(ctx); err != nil && lost == nil {
		if errors.Is(err, ErrNotHeld) {
			// Expired after fn returned, before the release: fn ran under a
			// valid lock, so this is not a loss fn has to hear about.
			err = nil
		}
		return errors.Join(fnErr, err)
	}
	return errors.Join(fnErr, lost)
}

// renew extends l every interval until stop is closed or the lock is lost.
func (l *Lock) renew(ctx context.Context, stop <-chan struct{}, ttl, interval time.Duration, watchdog *time.Timer, cancel context.CancelCauseFunc) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		err := l.Refresh(ctx, ttl)
		switch {
		case err == nil:
			watchdog.Reset(time.Until(l.ValidUntil()))
		case errors.Is(err, ErrNotHeld):
			cancel(errors.Join(ErrLockLost, err))
			return
		}
		// Other errors (Redis unreachable, no quorum) are retried at the next
		// tick; the watchdog ends fn if none gets through in time.
	}
}
