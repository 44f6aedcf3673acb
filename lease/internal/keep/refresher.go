package keep

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease/internal/errs"
)

// Lease is what a Refresher renews: lease.Lock's Refresh and ValidUntil.
type Lease interface {
	ValidUntil() time.Time
	Refresh(ctx context.Context, ttl time.Duration) error
}

// Clock is the time source of a Refresher (lease.Clock, with this
// package's Timer).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is lease.Timer.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// RealClock is the real time.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Refresher renews l to ttl every interval on a timer of clock, with
// Keeper.Keep's contract: lost is called at most once, when a renewal
// finds l gone or, LossLead(ttl, interval) before l.ValidUntil, when no
// renewal has moved it; stop ends the renewal and waits for one in flight.
func Refresher(clock Clock, l Lease, ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	r := &refresher{clock: clock, l: l, ttl: ttl, interval: interval, lost: lost, lead: LossLead(ttl, interval)}
	r.mu.Lock()
	r.renew = clock.AfterFunc(interval, r.refresh)
	r.watchdog = clock.AfterFunc(r.untilExpiry(), r.expire)
	r.mu.Unlock()
	return r.stopNow
}

type refresher struct {
	clock         Clock
	l             Lease
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
	case errors.Is(err, errs.ErrNotHeld):
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
	cause := errs.ErrLeaseExpired
	if r.lastErr != nil {
		cause = errs.JoinSaying(errs.ErrLeaseExpired, "last renewal", r.lastErr)
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
