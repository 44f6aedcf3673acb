package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// waitDeadline starts the wait of an Obtain for ttl (backend.WaitDeadline):
// ctx's deadline, else WithMaxWait (default DefaultMaxWait), stretched
// once to the end of a lease seen about to end, plus the drift allowance.
func (o *options) waitDeadline(ctx context.Context, ttl time.Duration) backend.WaitDeadline {
	limit := o.maxWait
	if limit == 0 {
		limit = DefaultMaxWait
	}
	return backend.NewWaitDeadline(ctx, limit, ttl, o.drift(ttl))
}

// nextWait is how long to wait after the attempt-th attempt failed with
// held, or the error that ends the call (backend.WaitDeadline.Next).
func (o *options) nextWait(d *backend.WaitDeadline, attempt int, held error) (time.Duration, error) {
	backoff, ok := o.retry.Backoff(attempt)
	return d.Next(backoff, ok, held, seenTTL(held))
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

// WaitLimitError is lease.WaitLimitError: an Obtain (or ObtainMulti)
// that stopped waiting for a held lock because its wait limit passed.
type WaitLimitError = lease.WaitLimitError
