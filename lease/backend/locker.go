package backend

import (
	"context"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Client is what NewLocker needs of a backend's own client: its Obtain and
// Inspect, with its own option type O and Lock type L, and its options
// for the two lease options a Locker's caller may give (lease.WithRetry,
// lease.WithHolder).
type Client[O any, L lease.Lock] struct {
	Obtain     func(ctx context.Context, key string, ttl time.Duration, opts ...O) (L, error)
	Inspect    func(ctx context.Context, key string) (lease.Info, error)
	WithRetry  func(lease.RetryStrategy) O
	WithHolder func(id string) O
}

// NewLocker returns c as a lease.Locker. defaults are options for every
// Obtain of the Locker, over the client's own; a call's lease.WithRetry and
// lease.WithHolder override them. Its locks are the client's L values; an
// Obtain that fails returns a nil lease.Lock, never a nil L in one.
func NewLocker[O any, L lease.Lock](c Client[O, L], defaults ...O) lease.Locker {
	return &locker[O, L]{c: c, defaults: defaults}
}

type locker[O any, L lease.Lock] struct {
	c        Client[O, L]
	defaults []O
}

func (a *locker[O, L]) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lease.Option) (lease.Lock, error) {
	lo, err := lease.Apply(opts)
	if err != nil {
		return nil, err
	}
	call := a.defaults
	if lo.Retry != nil {
		call = append(call[:len(call):len(call)], a.c.WithRetry(lo.Retry))
	}
	if lo.Holder != "" {
		call = append(call[:len(call):len(call)], a.c.WithHolder(lo.Holder))
	}
	l, err := a.c.Obtain(ctx, key, ttl, call...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (a *locker[O, L]) Inspect(ctx context.Context, key string) (lease.Info, error) {
	return a.c.Inspect(ctx, key)
}
