package lease

import (
	"context"
	"errors"
	"time"
)

// Run obtains the lock on key from locker, runs fn while renewing the lease
// in the background, and releases the lock when fn returns. See RunLock for
// renewal, loss, a Release inside fn (ErrReleased) and panics. The options go to Obtain and to the renewal;
// Obtain's errors are returned as Obtain returns them, and fn is not called.
func Run(ctx context.Context, locker Locker, key string, ttl time.Duration, fn func(ctx context.Context, l Lock) error, opts ...Option) error {
	if locker == nil {
		return Invalid("nil Locker")
	}
	if fn == nil {
		return Invalid("nil fn")
	}
	o, err := Apply(opts)
	if err != nil {
		return err
	}
	if _, err := RenewInterval(ttl, o.RefreshInterval, DefaultDriftFactor); err != nil {
		return err
	}
	l, err := locker.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	return RunLock(ctx, l, ttl, func(ctx context.Context) error { return fn(ctx, l) }, opts...)
}

// RunLock runs fn under the obtained lock l, renewing it to ttl every
// WithRefreshInterval (default: a third of ttl) as Hold does, and releases
// it when fn returns.
//
// If a renewal finds the lock gone, or renewals cannot get through before
// l.ValidUntil, fn's ctx is cancelled no later than the last confirmed
// ValidUntil, and RunLock returns an error matching ErrLockLost (and fn's
// own error, when fn failed too); context.Cause of fn's ctx tells the
// reason. fn must stop its work promptly when its ctx is done: after that
// another holder may own the lock.
//
// A Release of l while fn runs (by fn, or by another goroutine) gives the
// lock up early: fn's ctx ends at once, its cause ErrReleased; RunLock does
// not release l again and returns an error matching ErrReleased (and fn's
// own error), since what fn did after the Release ran without the lock.
// (The backends of this project report such a Release to RunLock at once;
// for a backend that does not, see Hold.)
//
// If fn panics, the renewal stops and the lock is released before the
// panic goes on up the stack, so that a recovered panic (net/http recovers
// a handler's) does not leave the lock held until its TTL. No goroutine
// started by RunLock outlives it.
func RunLock(ctx context.Context, l Lock, ttl time.Duration, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return Invalid("nil fn")
	}
	h, err := Hold(ctx, l, ttl, opts...)
	if err != nil {
		_ = l.Release(ctx)
		return err
	}
	returned := false
	defer func() {
		if !returned { // fn panicked
			_ = h.Release(ctx)
		}
	}()
	fnErr := fn(h.Context())
	returned = true
	if released := h.released(); released != nil {
		_ = h.Release(ctx) // stops the renewal; releases nothing
		return Join(fnErr, released)
	}
	lost := h.lost()
	relErr := h.Release(ctx)
	switch {
	case lost != nil:
		return Join(fnErr, lost)
	case relErr != nil && !errors.Is(relErr, ErrNotHeld):
		// ErrNotHeld: the lease ended after fn returned, when fn had
		// run under a valid lock.
		return Join(fnErr, relErr)
	}
	return fnErr
}
