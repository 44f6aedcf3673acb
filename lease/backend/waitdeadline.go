package backend

import (
	"context"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// WaitDeadline is when an Obtain call stops waiting for a held lock: the
// context's deadline when it has one, else the wait limit, a cap: no
// attempt starts after it, and the call returns within the limit plus the
// round trip of the attempt made before it. Backends share it so that
// their waits follow one rule.
type WaitDeadline struct {
	at      time.Time
	bounded bool          // at is ctx's deadline
	limit   time.Duration // the wait limit (not bounded)
	held    error         // the last failed attempt's error (Next)
	seen    time.Duration // the holder's remaining lease it saw; < 0: unknown
}

// NewWaitDeadline starts the wait of an Obtain: until ctx's deadline if it
// has one, else for limit.
func NewWaitDeadline(ctx context.Context, limit time.Duration) WaitDeadline {
	if at, ok := ctx.Deadline(); ok {
		return WaitDeadline{at: at, bounded: true}
	}
	return WaitDeadline{at: time.Now().Add(limit), limit: limit, seen: -1}
}

// Next returns how long to wait after an attempt failed with held (an
// error matching lease.ErrNotObtained) and saw the holder's lease end in
// seen (negative: unknown), given the retry strategy's backoff (ok false:
// it gives up); or the error that ends the call: held when the strategy
// gives up; joined with context.DeadlineExceeded when ctx's deadline has
// passed; a *lease.WaitLimitError once the wait limit has passed. A wait
// never reaches past the limit; after it, Expired tells whether the next
// attempt may start.
func (d *WaitDeadline) Next(backoff time.Duration, ok bool, held error, seen time.Duration) (time.Duration, error) {
	if !ok {
		return 0, held
	}
	d.held, d.seen = held, seen
	left := time.Until(d.at)
	switch {
	case left > 0:
		return min(backoff, left), nil
	case d.bounded:
		return 0, lease.Join(held, context.DeadlineExceeded)
	}
	return 0, d.limitError()
}

// Expired returns nil while another attempt may start, and once the wait
// limit has passed the *lease.WaitLimitError that ends the call, with what
// the last failed attempt saw. A context's deadline never expires here:
// the context ends the wait itself. Backends call it before every attempt
// but the first, after the wait that Next returned.
func (d *WaitDeadline) Expired() error {
	if d.bounded || time.Now().Before(d.at) {
		return nil
	}
	return d.limitError()
}

func (d *WaitDeadline) limitError() error {
	held := d.held
	if held == nil {
		held = lease.ErrNotObtained
	}
	return &lease.WaitLimitError{Limit: d.limit, TTL: d.seen, Err: held}
}
