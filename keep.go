package redislock

import (
	"context"
	"time"

	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// keeping is the Lock's backend.Keeping, under a name of its own so that
// the Lock's method set shows nothing of it.
type keeping = backend.Keeping

// keeper is a Lock as its own backend.Keeper: Run and lease.Hold find it
// through the Lock's keeping.
type keeper struct{ *Lock }

var _ backend.Keeper = keeper{}

// Keep renews the lock to ttl every interval until stop is called, for Run
// and lease.Hold (see backend.Keeper): lost is called, at most once, when a
// renewal finds the lock gone or the validity ends before a renewal got
// through, never later than the last ValidUntil. The Client's observers
// see each renewal (RefreshDoneEvent.Renewal) and the loss (LossEvent).
//
// In single mode (standalone, Sentinel, Cluster) the Client's one renewer
// renews all its kept locks in batches (no goroutine or timer per lock);
// a Refresh by the holder moves the next renewal, and Release ends the
// renewal. Closing the Client reports its kept locks lost. In quorum mode,
// on a Ring, after Close, or with an interval that leaves the renewer too
// little time, each lock has its own timer and Refresh calls.
func (k keeper) Keep(ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	l := k.Lock
	if k := l.keepBatched(ttl, interval, lost); k != nil {
		return k.stop
	}
	return backend.Refresher(nil, renewal{l}, ttl, interval, func(cause error) {
		if obs := l.c.obs; obs != nil {
			obs.lockLost(context.Background(), observe.LossEvent{Key: l.key, Fence: l.fence, Held: time.Since(l.start), Cause: cause})
		}
		lost(cause)
	})
}

// renewal is a Lock whose Refresh is a renewal of Run or lease.Hold.
type renewal struct{ *Lock }

func (r renewal) Refresh(ctx context.Context, ttl time.Duration) error {
	return r.refresh(ctx, ttl, true)
}
