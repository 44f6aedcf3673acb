package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// errReleased is the cause of a Held's context after Release.
var errReleased = fmt.Errorf("%w: released", ErrNotHeld)

// Held is a lock held in the background, in the style of etcd's Session:
// renewed every interval until Release, with a Context that is cancelled
// the moment the lock is lost. Use it to hold a lock outside a callback;
// Run is the callback form. Its methods are safe for concurrent use.
type Held struct {
	lock   Lock
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func()

	once   sync.Once
	relErr error
	given  atomic.Bool // the Lock's own Release ended the hold (ErrReleased)
}

// Hold keeps l renewed to ttl every WithRefreshInterval (default: a third
// of ttl) until Release. If a renewal finds the lock gone, or renewals
// cannot get through before l.ValidUntil, the Context is cancelled with a
// cause matching ErrLockLost, no later than the last confirmed ValidUntil;
// Done is closed then. If l's own Release is called meanwhile, the Context
// is cancelled at once with ErrReleased as its cause (where l is a Keeper
// that reports its releases, as the Locks of this project's backends are;
// otherwise the next renewal finds the lock gone). ctx gives the Context
// its values and its cancellation; its end does not release the lock:
// call Release.
//
// A Lock that is a Keeper renews itself (its Keep); any other is renewed
// by a Refresher, one Refresh per interval on a timer (no goroutine
// between renewals). Bad options or an interval not shorter than ttl are
// errors matching ErrInvalidArgument; the lock is left as it is. (Run
// checks the interval against the validity, ttl minus drift, before it
// obtains the lock.)
func Hold(ctx context.Context, l Lock, ttl time.Duration, opts ...Option) (*Held, error) {
	if l == nil {
		return nil, Invalid("nil Lock")
	}
	o, err := Apply(opts)
	if err != nil {
		return nil, err
	}
	interval := o.RefreshInterval
	if interval == 0 {
		interval = ttl / 3
	}
	if interval <= 0 || interval >= ttl {
		// Backends check the interval against their drift first.
		return nil, Invalid("refresh interval %v leaves no time to renew a TTL of %v", interval, ttl)
	}
	h := &Held{lock: l}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	lost := func(cause error) {
		if errors.Is(cause, ErrReleased) {
			h.given.Store(true) // given up, not lost
			h.cancel(cause)
			return
		}
		h.cancel(Join(ErrLockLost, cause))
	}
	k, ok := l.(Keeper)
	if !ok {
		k = Refresher{Lock: l}
	}
	h.stop = k.Keep(ttl, interval, lost)
	return h, nil
}

// Lock returns the held lock.
func (h *Held) Lock() Lock { return h.lock }

// Context returns a context that is cancelled when the lock is lost (its
// cause matches ErrLockLost), when it is released (by Release, or by the
// Lock's own Release: ErrReleased), or when Hold's ctx ends.
func (h *Held) Context() context.Context { return h.ctx }

// Done is closed when Context is done.
func (h *Held) Done() <-chan struct{} { return h.ctx.Done() }

// Err returns nil while the lock is held; after that, why it is not: an
// error matching ErrLockLost once lost, ErrNotHeld once released by
// Release, ErrReleased once released by the Lock's own Release, or the
// error of Hold's ctx if that ended first.
func (h *Held) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// lost returns the cause of a loss, or nil if the lock was not lost. A
// lock whose last confirmed validity has passed is lost, whether or not
// its renewal has said so yet (the process was paused past it, say, and
// its timers have not run).
func (h *Held) lost() error {
	if cause := context.Cause(h.ctx); errors.Is(cause, ErrLockLost) {
		return cause
	}
	if vu := h.lock.ValidUntil(); !vu.IsZero() && !now(h.lock).Before(vu) {
		return Join(ErrLockLost, ErrLeaseExpired)
	}
	return nil
}

// Release stops the renewal and releases the lock; later calls return the
// first call's result. A lock released by its own Release meanwhile (Err
// matched ErrReleased) is not released again: Release returns ErrNotHeld,
// as a second Release of the Lock does.
func (h *Held) Release(ctx context.Context) error {
	h.once.Do(func() {
		h.stop()
		h.cancel(errReleased)
		if h.given.Load() {
			h.relErr = ErrNotHeld
			return
		}
		h.relErr = h.lock.Release(ctx)
	})
	return h.relErr
}

// released returns ErrReleased if the Lock's own Release ended the hold
// (whatever ended the Context first), else nil.
func (h *Held) released() error {
	if h.given.Load() {
		return ErrReleased
	}
	return nil
}
