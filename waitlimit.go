package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// waitDeadline is when an Obtain call stops waiting for a contended lock:
// ctx's deadline (bounded), else its wait limit (WithMaxWait, default
// DefaultMaxWait), stretched once to the end of a lease seen about to end.
type waitDeadline struct {
	at      time.Time
	bounded bool          // at is ctx's deadline
	limit   time.Duration // the wait limit (not bounded)
	ttl     time.Duration // the TTL asked for: a lease seen within it is about to end
	margin  time.Duration // after a lease's end, for clocks and the expiry to agree
	last    bool          // the limit has passed: waiting for the lease seen then
}

func (o *options) waitDeadline(ctx context.Context, ttl time.Duration) waitDeadline {
	if at, ok := ctx.Deadline(); ok {
		return waitDeadline{at: at, bounded: true}
	}
	limit := o.maxWait
	if limit == 0 {
		limit = DefaultMaxWait
	}
	return waitDeadline{at: time.Now().Add(limit), limit: limit, ttl: ttl, margin: o.drift(ttl)}
}

// next returns how long to wait after the attempt-th attempt failed with
// held (an error matching ErrNotObtained), or the error that ends the call:
// held when the retry strategy gives up; joined with
// context.DeadlineExceeded when ctx's deadline has passed; a
// *WaitLimitError at the wait limit. When the limit passes while the lease
// the attempt saw ends within the TTL asked for, the wait goes on until
// that lease's end plus margin, and ends at the first attempt after that
// which finds the lock still held.
func (d *waitDeadline) next(o *options, attempt int, held error) (time.Duration, error) {
	wait, ok := o.retry.Backoff(attempt)
	if !ok {
		return 0, held
	}
	now := time.Now()
	left := d.at.Sub(now)
	switch {
	case left > 0:
		return min(wait, left), nil
	case d.bounded:
		return 0, lease.Join(held, context.DeadlineExceeded)
	}
	pttl := seenTTL(held)
	if d.last || pttl < 0 || pttl > d.ttl {
		return 0, &WaitLimitError{Limit: d.limit, TTL: pttl, Err: held}
	}
	// The limit has passed while the lease seen is about to end: wait for
	// its end, not for the holder's renewals.
	d.last = true
	d.at = now.Add(pttl + d.margin)
	return min(wait, pttl+d.margin), nil
}

// reached reports whether the wait limit has passed: the remaining attempts
// are made, even by a caller queued behind other waiters of its Client, so
// that it gives up on what it saw itself.
func (d *waitDeadline) reached() bool {
	return !d.bounded && !time.Now().Before(d.at)
}

// seenTTL is the holder's remaining lease that a failed attempt reported,
// negative if unknown.
func seenTTL(err error) time.Duration {
	var he *heldError
	if errors.As(err, &he) {
		return he.pttl
	}
	return -1
}

// WaitLimitError is the error of an Obtain (or ObtainMulti) that stopped
// waiting for a held lock because its wait limit passed (WithMaxWait or its
// default; a context deadline ends a wait with the context's error
// instead). It matches ErrNotObtained, and Err, the error of the last
// attempt. TTL is the holder's remaining lease that the last attempt saw,
// negative when unknown (in quorum mode: the longest among the nodes that
// answered "held").
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
