package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Locker returns the Client as a lease.Locker: the contract that the
// pattern packages (leader election, deduplication) and code meant for any
// backend are written against. opts are defaults for its Obtain calls,
// over the Client's own; a call's lease.WithRetry and lease.WithHolder
// override them. Its locks are *Lock values.
func (c *Client) Locker(opts ...Option) lease.Locker {
	return backend.NewLocker(backend.Client[Option, *Lock]{
		Obtain: c.Obtain, Inspect: c.Inspect, WithRetry: WithRetry, WithHolder: WithHolder,
	}, opts...)
}

// Inspect reports who holds key, as the database sees it now: whether it
// is held, the holder identity the grant recorded (WithHolder), its fence,
// its remaining lease, and Waiters 1 when a notified waiter (WithNotify)
// waits for it (the database does not count them). The token is never
// reported.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if _, err := c.callOptions(nil); err != nil {
		return lease.Info{}, err
	}
	if err := checkKey(key); err != nil {
		return lease.Info{}, err
	}
	info := lease.Info{Key: key}
	var us int64
	var wanted bool
	err := c.pool.QueryRow(ctx, c.sql.inspect, key).Scan(&info.Holder, &info.Fence, &us, &wanted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return info, nil
	case err != nil:
		return lease.Info{}, fmt.Errorf("redislock: inspect %q: %w", key, err)
	}
	info.Held, info.TTL = true, time.Duration(us)*time.Microsecond
	if wanted {
		info.Waiters = 1
	}
	return info, nil
}
