package lockbench

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
)

// Backoff settings shared by the adapters so the comparison is like for like.
const (
	LinearDelay = time.Millisecond
	ExpMin      = 2 * time.Millisecond
	ExpMax      = 64 * time.Millisecond
)

// Ours returns the adapters for this module's library: single-instance (New)
// with one node, Redlock-style (NewQuorum) with more.
func Ours() []Library {
	return []Library{
		{
			Name: "redislock/linear-1ms", Primary: true, Quorum: true,
			Note: "redislock.LinearBackoff(1ms); Run for renew",
			New:  oursWith(redislock.LinearBackoff(LinearDelay)),
		},
		{
			Name: "redislock/exp", Quorum: true,
			Note: "redislock.ExponentialBackoff(2ms, 64ms) (jittered)",
			New:  oursWith(redislock.ExponentialBackoff(ExpMin, ExpMax)),
		},
	}
}

func oursWith(retry redislock.RetryStrategy) func([]redis.UniversalClient) (Locker, error) {
	return func(nodes []redis.UniversalClient) (Locker, error) {
		if len(nodes) == 1 {
			return &oursLocker{redislock.New(nodes[0], redislock.WithRetry(retry))}, nil
		}
		c, err := redislock.NewQuorum(nodes, redislock.WithRetry(retry))
		if err != nil {
			return nil, err
		}
		return &oursLocker{c}, nil
	}
}

type oursLocker struct{ c *redislock.Client }

func (o *oursLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Held, error) {
	l, err := o.c.Obtain(ctx, key, ttl)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, errors.Join(ErrBusy, err)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (o *oursLocker) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) error {
	return o.c.Run(ctx, key, ttl, func(ctx context.Context, _ *redislock.Lock) error { return fn(ctx) })
}

func (o *oursLocker) Close() error { return o.c.Close() }
