package backend

import (
	"slices"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/internal/keep"
)

// Keeper renews the leases of a backend's locks itself (in batches, or on
// a clock of its own) for lease.Hold and lease.Run, which otherwise renew
// a Lock with one Refresh per interval.
type Keeper interface {
	// Keep renews the lease to ttl every interval until stop is called. It
	// calls lost, at most once, when a renewal finds the grant gone (a
	// cause matching lease.ErrNotHeld) or when the validity last confirmed
	// ends without a renewal getting through (a cause matching
	// lease.ErrLeaseExpired, naming the last renewal's error); never later
	// than the ValidUntil last confirmed. After stop returns, lost is not
	// called and no renewal is in flight.
	//
	// When the Lock's own Release is called while it is kept, Keep calls
	// lost at once (before that Release returns, whatever its outcome)
	// with a cause matching lease.ErrReleased, and reports nothing more:
	// Hold and Run then end the holder's work, and Run does not release
	// the lock again. ReleaseWatch does that bookkeeping. A Keeper that
	// does not leaves the release to be found by its next renewal (a
	// loss).
	//
	// A Keeper whose Lock's ValidUntil is on a clock other than the real
	// time (a test clock, a clock with an offset) also has a method
	// Now() time.Time that reads it: lease.Run uses it to tell whether the
	// validity passed while fn ran (its process paused past it, its timers
	// not run yet).
	Keep(ttl, interval time.Duration, lost func(cause error)) (stop func())
}

// ReleaseWatch lets a Lock's Release end the Keeps under way at once, as
// Keeper says: a backend's Lock holds one, its Keeper's Keep goes through
// Keep, and its Release calls Released first. The zero value is ready to
// use; it must not be copied after first use.
type ReleaseWatch struct {
	mu       sync.Mutex
	released bool         // guarded by mu: Released was called
	keeps    []*watchKeep // guarded by mu: the Keeps under way
}

// watchKeep is one Keep under way: its lost, called at most once, and
// never after its stop returned.
type watchKeep struct {
	mu      sync.Mutex
	done    bool           // guarded by mu: lost was called, or the Keep stopped
	running sync.WaitGroup // a call of lost under way
	lost    func(cause error)
}

func (k *watchKeep) report(cause error) {
	k.mu.Lock()
	if k.done {
		k.mu.Unlock()
		return
	}
	k.done = true
	k.running.Add(1)
	k.mu.Unlock()
	defer k.running.Done()
	k.lost(cause) // outside mu: it may release the Lock
}

// stop ends the reports and waits for one under way.
func (k *watchKeep) stop() {
	k.mu.Lock()
	k.done = true
	k.mu.Unlock()
	k.running.Wait()
}

// Keep runs keep, a Keeper's renewal, with a lost that Released calls (with
// lease.ErrReleased) and that reports at most once, never after the stop
// it returns. Keep of a Lock already released reports ErrReleased at once
// and renews nothing.
func (w *ReleaseWatch) Keep(lost func(cause error), keep func(lost func(cause error)) (stop func())) (stop func()) {
	k := &watchKeep{lost: lost}
	w.mu.Lock()
	released := w.released
	if !released {
		w.keeps = append(w.keeps, k)
	}
	w.mu.Unlock()
	if released {
		k.report(lease.ErrReleased)
		return func() {}
	}
	inner := keep(k.report)
	return func() {
		k.stop()
		w.mu.Lock()
		w.keeps = slices.DeleteFunc(w.keeps, func(o *watchKeep) bool { return o == k })
		w.mu.Unlock()
		inner()
	}
}

// Released tells the Keeps under way, and those to come, that the Lock's
// Release was called (see Keeper).
func (w *ReleaseWatch) Released() {
	w.mu.Lock()
	w.released = true
	keeps := w.keeps
	w.keeps = nil
	w.mu.Unlock()
	for _, k := range keeps {
		k.report(lease.ErrReleased)
	}
}

// Keeping hands a Lock's Keeper to lease.Hold and lease.Run. A backend's
// Lock type embeds it under an unexported name, so that the Lock's method
// set shows nothing of it:
//
//	type keeping = backend.Keeping
//
//	type Lock struct {
//		keeping // KeepWith(keeperOf(l)), set when the Lock is made
//		...
//	}
//
// A Lock without a Keeping (or with its zero value) is renewed by Refresh.
type Keeping struct{ keep.Hook }

// KeepWith returns the Keeping of a Lock that k renews.
func KeepWith(k Keeper) Keeping { return Keeping{keep.NewHook(k)} }

// Refresher renews l to ttl every interval on a timer of clock (nil: the
// real clock), as lease.Hold does for a Lock without a Keeper, with
// Keeper.Keep's contract: lost is called at most once, when a renewal
// finds l gone or, LossLead(ttl, interval) before l.ValidUntil, when no
// renewal has moved it; stop ends the renewal and waits for one in flight.
// A backend's Keeper may use it on a clock of its own, or for the locks it
// does not renew in batches.
func Refresher(clock lease.Clock, l lease.Lock, ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	var c keep.Clock = keep.RealClock{}
	if clock != nil {
		c = clockOf{clock}
	}
	return keep.Refresher(c, l, ttl, interval, lost)
}

// clockOf is a lease.Clock as the refresher's clock.
type clockOf struct{ c lease.Clock }

func (c clockOf) Now() time.Time                                 { return c.c.Now() }
func (c clockOf) AfterFunc(d time.Duration, f func()) keep.Timer { return c.c.AfterFunc(d, f) }

// RenewInterval returns how often a lease of ttl is renewed: interval, or,
// when interval is 0, a third of ttl but at most half the validity (so
// that every TTL CheckTTL accepts can be renewed). An interval that leaves
// no time to renew before the validity ends (ttl minus Drift(ttl, factor))
// is an error matching lease.ErrInvalidArgument.
func RenewInterval(ttl, interval time.Duration, factor float64) (time.Duration, error) {
	return keep.RenewInterval(ttl, interval, factor)
}

// LossLead is how far ahead of ValidUntil a lease whose renewals did not
// get through is reported lost (by a Refresher, and by backends that renew
// in batches): timers fire late, never early, so a report due at
// ValidUntil itself would come after it, by as much as the scheduler is
// late. For a lease of ttl renewed every interval it is the larger of 5 ms
// and 1% of ttl, but at most a quarter of interval and a quarter of the
// time between a renewal and the end of the lease it renews (ttl -
// interval), so that it never comes before a renewal could confirm.
func LossLead(ttl, interval time.Duration) time.Duration { return keep.LossLead(ttl, interval) }

// KeeperOf returns the Keeper that l's Keeping names, nil when l's backend
// renews it by Refresh: for a Lock type that wraps another backend's Lock
// and keeps its renewal.
func KeeperOf(l lease.Lock) Keeper {
	if k := keep.Of(l); k != nil {
		return k
	}
	return nil
}
