package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrLeaseExpired is the cause of a loss when the validity last confirmed
// ended before a renewal got through (the backend was unreachable, slow or
// paused); it is joined with the last renewal's error, if any.
var ErrLeaseExpired = errors.New("redislock: lease expired before a renewal got through")

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
}

// Hold keeps l renewed to ttl every WithRefreshInterval (default: a third
// of ttl) until Release. If a renewal finds the lock gone, or renewals
// cannot get through before l.ValidUntil, the Context is cancelled with a
// cause matching ErrLockLost, no later than the last confirmed ValidUntil;
// Done is closed then. ctx gives the Context its values and its
// cancellation; its end does not release the lock: call Release.
//
// A Lock that implements Keeper is renewed by its backend; others by one
// Refresh per interval on a timer (no goroutine between renewals). Bad
// options or an interval not shorter than ttl are errors matching
// ErrInvalidArgument; the lock is left as it is. (Run checks the interval
// against the validity, ttl minus drift, before it obtains the lock.)
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
	lost := func(cause error) { h.cancel(Join(ErrLockLost, cause)) }
	if k, ok := l.(Keeper); ok {
		h.stop = k.Keep(ttl, interval, lost)
	} else {
		h.stop = Refresher(nil, l, ttl, interval, lost)
	}
	return h, nil
}

// Lock returns the held lock.
func (h *Held) Lock() Lock { return h.lock }

// Context returns a context that is cancelled when the lock is lost (its
// cause matches ErrLockLost), when it is released, or when Hold's ctx ends.
func (h *Held) Context() context.Context { return h.ctx }

// Done is closed when Context is done.
func (h *Held) Done() <-chan struct{} { return h.ctx.Done() }

// Err returns nil while the lock is held; after that, why it is not: an
// error matching ErrLockLost once lost, ErrNotHeld once released, or the
// error of Hold's ctx if that ended first.
func (h *Held) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// lost returns the cause of a loss, or nil if the lock was not lost.
func (h *Held) lost() error {
	if cause := context.Cause(h.ctx); errors.Is(cause, ErrLockLost) {
		return cause
	}
	return nil
}

// Release stops the renewal and releases the lock; later calls return the
// first call's result.
func (h *Held) Release(ctx context.Context) error {
	h.once.Do(func() {
		h.stop()
		h.cancel(errReleased)
		h.relErr = h.lock.Release(ctx)
	})
	return h.relErr
}

// Clock is a time source: the real one (nil, where a Clock is optional) or
// a fake one in tests (leasetest.FakeClock).
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a Clock, as *time.Timer is of the real one.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// LossLead is how far ahead of ValidUntil a lease whose renewals did not
// get through is reported lost (by a Refresher, and by backends that renew
// in batches): timers fire late, never early, so a report due at
// ValidUntil itself would come after it, by as much as the scheduler is
// late. For a lease of ttl renewed every interval it is the larger of 5 ms
// and 1% of ttl, but at most a quarter of interval and a quarter of the
// time between a renewal and the end of the lease it renews (ttl -
// interval), so that it never comes before a renewal could confirm.
func LossLead(ttl, interval time.Duration) time.Duration {
	return min(max(5*time.Millisecond, ttl/100), interval/4, (ttl-interval)/4)
}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Refresher renews l to ttl every interval on a timer of clock (nil: the
// real clock), as Hold does for a Lock that is not a Keeper, with
// Keeper.Keep's contract: lost is called at most once, when a renewal finds
// l gone or, LossLead(ttl, interval) before l.ValidUntil, when no renewal
// has moved it;
// stop ends the renewal and waits for one in flight. Backends may use it to
// implement Keeper on a clock of their own.
func Refresher(clock Clock, l Lock, ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	if clock == nil {
		clock = realClock{}
	}
	r := &refresher{clock: clock, l: l, ttl: ttl, interval: interval, lost: lost, lead: LossLead(ttl, interval)}
	r.mu.Lock()
	r.renew = clock.AfterFunc(interval, r.refresh)
	r.watchdog = clock.AfterFunc(r.untilExpiry(), r.expire)
	r.mu.Unlock()
	return r.stopNow
}

type refresher struct {
	clock         Clock
	l             Lock
	ttl, interval time.Duration
	lost          func(error)
	lead          time.Duration // the loss by expiry is reported this long before ValidUntil

	mu       sync.Mutex
	renew    Timer
	watchdog Timer
	cancel   context.CancelFunc // guarded by mu: of the renewal in flight
	stopped  bool               // guarded by mu: no more callbacks
	done     bool               // guarded by mu: lost was called
	lastErr  error              // guarded by mu: the last renewal's error
	running  sync.WaitGroup     // callbacks under way; stop waits for them
}

// untilExpiry is the time left until the loss by expiry is due.
func (r *refresher) untilExpiry() time.Duration {
	// ValidUntil is the zero Time once the grant is known lost: subtracting
	// after Sub, which saturates, would overflow.
	return r.l.ValidUntil().Add(-r.lead).Sub(r.clock.Now())
}

// enter registers a timer callback unless the refresher has stopped.
func (r *refresher) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.done {
		return false
	}
	r.running.Add(1)
	return true
}

func (r *refresher) refresh() {
	if !r.enter() {
		return
	}
	defer r.running.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	err := r.l.Refresh(ctx, r.ttl)
	switch {
	case errors.Is(err, ErrNotHeld):
		r.fail(err)
		return
	case err == nil:
		r.mu.Lock()
		r.lastErr = nil
		r.watchdog.Reset(r.untilExpiry())
		r.mu.Unlock()
	default:
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
	}
	r.mu.Lock()
	if !r.stopped && !r.done {
		r.renew.Reset(r.interval)
	}
	r.mu.Unlock()
}

// expire runs LossLead before the last confirmed ValidUntil: unless a
// renewal has moved it since, the lease is lost.
func (r *refresher) expire() {
	if !r.enter() {
		return
	}
	defer r.running.Done()
	if left := r.untilExpiry(); left > 0 {
		r.mu.Lock()
		r.watchdog.Reset(left)
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	cause := ErrLeaseExpired
	if r.lastErr != nil {
		cause = joinSaying(ErrLeaseExpired, "last renewal", r.lastErr)
	}
	r.mu.Unlock()
	r.fail(cause)
}

// fail reports the loss once and stops the timers.
func (r *refresher) fail(cause error) {
	r.mu.Lock()
	if r.done || r.stopped {
		r.mu.Unlock()
		return
	}
	r.done = true
	r.renew.Stop()
	r.watchdog.Stop()
	r.mu.Unlock()
	r.lost(cause)
}

func (r *refresher) stopNow() {
	r.mu.Lock()
	r.stopped = true
	r.renew.Stop()
	r.watchdog.Stop()
	if r.cancel != nil {
		r.cancel() // a renewal in flight
	}
	r.mu.Unlock()
	r.running.Wait()
}
