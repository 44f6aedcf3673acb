package backend

import (
	"context"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/internal/errs"
)

// WaitDeadline is when an Obtain call stops waiting for a held lock: the
// context's deadline when it has one, else the wait limit, stretched once to
// the end of a lease seen about to end. Backends share it so that their
// waits follow one rule.
type WaitDeadline struct {
	at      time.Time
	bounded bool          // at is ctx's deadline
	limit   time.Duration // the wait limit (not bounded)
	ttl     time.Duration // the TTL asked for: a lease seen within it is about to end
	margin  time.Duration // after a lease's end, for clocks and the expiry to agree
	last    bool          // the limit has passed: waiting for the lease seen then
	next    time.Time     // the earliest the next attempt can be made: the last Next's time plus its wait
}

// NewWaitDeadline starts the wait of an Obtain asking for ttl: until ctx's
// deadline if it has one, else for limit, and then, if the lease last seen
// ends within ttl, until that lease's end plus margin.
func NewWaitDeadline(ctx context.Context, limit, ttl, margin time.Duration) WaitDeadline {
	if at, ok := ctx.Deadline(); ok {
		return WaitDeadline{at: at, bounded: true}
	}
	return WaitDeadline{at: time.Now().Add(limit), limit: limit, ttl: ttl, margin: margin}
}

// Next returns how long to wait after an attempt failed with held (an
// error matching lease.ErrNotObtained) and seeing the holder's lease end
// in seen (negative: unknown), given the retry strategy's backoff (ok
// false: it gives up); or the error that ends the call: held when the
// strategy gives up; joined with context.DeadlineExceeded when ctx's
// deadline has passed; a *lease.WaitLimitError at the wait limit. When the
// limit passes while the lease seen ends within the TTL asked for, the
// wait goes on until that lease's end plus margin, and ends at the first
// attempt made after that which finds the lock still held (an attempt made
// before, whose reply came after, is followed by another at once).
func (d *WaitDeadline) Next(backoff time.Duration, ok bool, held error, seen time.Duration) (time.Duration, error) {
	if !ok {
		return 0, held
	}
	now := time.Now()
	left := d.at.Sub(now)
	switch {
	case left > 0:
		return d.wait(now, min(backoff, left)), nil
	case d.bounded:
		return 0, errs.Join(held, context.DeadlineExceeded)
	case d.last && d.next.Before(d.at):
		// The attempt was made before the lease seen was to end, and its
		// reply came late: it shows that lease, not a renewal.
		return d.wait(now, 0), nil
	case d.last || seen < 0 || seen > d.ttl:
		return 0, &lease.WaitLimitError{Limit: d.limit, TTL: seen, Err: held}
	}
	// The limit has passed while the lease seen is about to end: wait for
	// its end, not for the holder's renewals.
	d.last = true
	d.at = now.Add(seen + d.margin)
	return d.wait(now, min(backoff, seen+d.margin)), nil
}

// wait returns w, a wait that begins at now, noting when the next attempt
// can be made.
func (d *WaitDeadline) wait(now time.Time, w time.Duration) time.Duration {
	d.next = now.Add(w)
	return w
}

// Reached reports whether the wait limit (not a context deadline) has
// passed.
func (d *WaitDeadline) Reached() bool {
	return !d.bounded && !time.Now().Before(d.at)
}
