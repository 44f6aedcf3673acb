package lease

import (
	"context"
	"fmt"
	"time"
)

// DefaultMaxWait is how long a backend's Obtain waits for a held lock when
// the caller's context has no deadline, unless configured otherwise: long
// enough not to give up on a holder that is alive and renewing for a while.
const DefaultMaxWait = 30 * time.Second

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
// error matching ErrNotObtained) and seeing the holder's lease end in seen
// (negative: unknown), given the retry strategy's backoff (ok false: it
// gives up); or the error that ends the call: held when the strategy gives
// up; joined with context.DeadlineExceeded when ctx's deadline has passed;
// a *WaitLimitError at the wait limit. When the limit passes while the lease
// seen ends within the TTL asked for, the wait goes on until that lease's
// end plus margin, and ends at the first attempt after that which finds the
// lock still held.
func (d *WaitDeadline) Next(backoff time.Duration, ok bool, held error, seen time.Duration) (time.Duration, error) {
	if !ok {
		return 0, held
	}
	now := time.Now()
	left := d.at.Sub(now)
	switch {
	case left > 0:
		return min(backoff, left), nil
	case d.bounded:
		return 0, Join(held, context.DeadlineExceeded)
	case d.last || seen < 0 || seen > d.ttl:
		return 0, &WaitLimitError{Limit: d.limit, TTL: seen, Err: held}
	}
	// The limit has passed while the lease seen is about to end: wait for
	// its end, not for the holder's renewals.
	d.last = true
	d.at = now.Add(seen + d.margin)
	return min(backoff, seen+d.margin), nil
}

// Reached reports whether the wait limit (not a context deadline) has
// passed.
func (d *WaitDeadline) Reached() bool {
	return !d.bounded && !time.Now().Before(d.at)
}

// WaitLimitError is the error of an Obtain that stopped waiting for a held
// lock because its wait limit passed (a backend's WithMaxWait or its
// default; a context deadline ends a wait with the context's error
// instead). It matches ErrNotObtained, and Err, the error of the last
// attempt. TTL is the holder's remaining lease that the last attempt saw,
// negative when unknown (in the Redis client's quorum mode: the longest
// among the nodes that answered "held").
type WaitLimitError struct {
	Limit time.Duration // the wait limit that passed
	TTL   time.Duration // the remaining lease last seen; < 0: unknown
	Err   error         // the last attempt's error
}

func (e *WaitLimitError) Error() string {
	if e.TTL < 0 {
		return fmt.Sprintf("redislock: lock not obtained: wait limit %v reached", e.Limit)
	}
	return fmt.Sprintf("redislock: lock not obtained: wait limit %v reached, held for %v more", e.Limit, e.TTL)
}

// Unwrap returns the last attempt's error, which matches ErrNotObtained.
func (e *WaitLimitError) Unwrap() error { return e.Err }

// Is matches ErrNotObtained, also when the last attempt's error was lost.
func (e *WaitLimitError) Is(target error) bool { return target == ErrNotObtained }
