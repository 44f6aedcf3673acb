package lease

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Keeper is a Lock that renews its lease itself (in batches, or on a
// clock of its own), as io.WriterTo is a Reader that writes itself out:
// Hold and Run find it by a type assertion and call its Keep, and renew
// any other Lock with a Refresher.
type Keeper interface {
	// Keep renews the lease to ttl every interval until stop is called. It
	// calls lost, at most once, when a renewal finds the grant gone (a
	// cause matching ErrNotHeld) or when the validity last confirmed ends
	// without a renewal getting through (a cause matching ErrLeaseExpired,
	// naming the last renewal's error); never later than the ValidUntil
	// last confirmed. After stop returns, lost is not called and no
	// renewal is in flight.
	//
	// When the Lock's own Release is called while it is kept, Keep calls
	// lost at once (before that Release returns, whatever its outcome)
	// with a cause matching ErrReleased, and reports nothing more: Hold
	// and Run then end the holder's work, and Run does not release the
	// lock again (lease/backend.ReleaseWatch does that bookkeeping). A
	// Keeper that does not leaves the release to be found by its next
	// renewal (a loss).
	//
	// A Keeper whose ValidUntil is on a clock other than the real time (a
	// test clock, a clock with an offset) also has a method Now()
	// time.Time that reads it: Run uses it to tell whether the validity
	// passed while fn ran (its process paused past it, its timers not run
	// yet).
	Keep(ttl, interval time.Duration, lost func(cause error)) (stop func())
}

// Refresher is the Keeper of a Lock that renews it by Refresh, on a timer
// of Clock (nil: the real time), with no goroutine between renewals: Hold
// and Run use it for a Lock that is not a Keeper, and a Keeper may use it
// on a clock of its own, or for the locks it does not renew in batches.
// Its Keep reports the loss by expiry LossLead(ttl, interval) before
// ValidUntil.
type Refresher struct {
	Clock Clock // nil: the real time
	Lock  Lock
}

var _ Keeper = Refresher{}

// Keep renews r.Lock to ttl every interval as Keeper.Keep says.
func (r Refresher) Keep(ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	clock := r.Clock
	if clock == nil {
		clock = realClock{}
	}
	k := &refresher{clock: clock, l: r.Lock, ttl: ttl, interval: interval, lost: lost, lead: LossLead(ttl, interval)}
	k.mu.Lock()
	k.renew = clock.AfterFunc(interval, k.refresh)
	k.watchdog = clock.AfterFunc(k.untilExpiry(), k.expire)
	k.mu.Unlock()
	return k.stop
}

// refresher is one Keep of a Refresher.
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

func (r *refresher) stop() {
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

// driftFloor is added to every drift: 1 ms for the expiry precision of the
// backend plus 1 ms of minimum clock drift, as the Redlock spec does.
const driftFloor = 2 * time.Millisecond

// Drift is the part of a lease of ttl that its validity gives up for clock
// drift: ttl * factor + 2 ms (1 ms for the expiry precision of the backend
// plus 1 ms of minimum clock drift, as the Redlock spec does).
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + driftFloor
}

// RenewInterval returns how often a lease of ttl is renewed: interval, or,
// when interval is 0, a third of ttl but at most half the validity (ttl
// minus Drift(ttl, factor)), so that every TTL a backend accepts can be
// renewed. An interval that leaves no time to renew before the validity
// ends is an error matching ErrInvalidArgument.
func RenewInterval(ttl, interval time.Duration, factor float64) (time.Duration, error) {
	validity := ttl - Drift(ttl, factor)
	if interval == 0 {
		interval = min(ttl/3, validity/2)
	}
	if interval <= 0 || interval >= validity {
		return 0, Invalid("refresh interval %v leaves no time to renew a TTL of %v (validity %v after drift)", interval, ttl, validity)
	}
	return interval, nil
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
