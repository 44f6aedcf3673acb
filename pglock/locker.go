package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redislock-go/redislock/lease"
)

// Locker returns the Client as a lease.Locker: the contract that the
// pattern packages (leader election, deduplication) and code meant for any
// backend are written against. opts are defaults for its Obtain calls,
// over the Client's own; a call's lease.WithRetry and lease.WithHolder
// override them. Its locks are *Lock values.
func (c *Client) Locker(opts ...Option) lease.Locker { return &leaseLocker{c: c, opts: opts} }

type leaseLocker struct {
	c    *Client
	opts []Option
}

var _ lease.Locker = (*leaseLocker)(nil)

func (a *leaseLocker) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lease.Option) (lease.Lock, error) {
	lo, err := lease.Apply(opts)
	if err != nil {
		return nil, err
	}
	call := a.opts
	if lo.Retry != nil {
		call = append(call[:len(call):len(call)], WithRetry(lo.Retry))
	}
	if lo.Holder != "" {
		call = append(call[:len(call):len(call)], WithHolder(lo.Holder))
	}
	l, err := a.c.Obtain(ctx, key, ttl, call...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (a *leaseLocker) Inspect(ctx context.Context, key string) (lease.Info, error) {
	return a.c.Inspect(ctx, key)
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
