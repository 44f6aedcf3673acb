// Package peers registers the adapters for other Go Redis lock libraries, so
// that the bench scenarios compare them with redislock side by side. It is a
// separate module: the library never depends on the libraries it measures.
package peers

import (
	"context"
	"errors"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/bench/lockbench"
)

// Libraries returns the peer adapters: bsm/redislock v0.9.4 (single node),
// go-redsync/redsync v4 (one or more pools) and rueidislock (single node,
// on its own rueidis client, v1.0.79: its rueidislock is the code of
// v1.0.80, which needs Go 1.26).
func Libraries() []lockbench.Library {
	return append([]lockbench.Library{
		{
			Name: "bsm/linear-1ms", Primary: true,
			Note: "bsm/redislock LinearBackoff(1ms); renew: Refresh every TTL/3",
			New:  bsmWith(func() bsm.RetryStrategy { return bsm.LinearBackoff(lockbench.LinearDelay) }),
		},
		{
			Name: "bsm/exp",
			Note: "bsm/redislock ExponentialBackoff(2ms, 64ms), fresh per Obtain (it is stateful)",
			New:  bsmWith(func() bsm.RetryStrategy { return bsm.ExponentialBackoff(lockbench.ExpMin, lockbench.ExpMax) }),
		},
		{
			Name: "redsync/default", Primary: true, Quorum: true,
			Note: "redsync NewMutex defaults (32 tries, 50-250ms random delay), WithExpiry(ttl); renew: ExtendContext every TTL/3",
			New:  redsyncWith(),
		},
		{
			Name: "redsync/1ms", Quorum: true,
			Note: "redsync WithRetryDelay(1ms) (32 tries)",
			New:  redsyncWith(redsync.WithRetryDelay(lockbench.LinearDelay)),
		},
	}, rueidislockLibraries()...)
}

// ---- bsm/redislock ----

type bsmLocker struct {
	c     *bsm.Client
	retry func() bsm.RetryStrategy
}

func bsmWith(retry func() bsm.RetryStrategy) func([]redis.UniversalClient) (lockbench.Locker, error) {
	return func(nodes []redis.UniversalClient) (lockbench.Locker, error) {
		if len(nodes) != 1 {
			return nil, errors.New("bsm/redislock has no quorum mode")
		}
		return &bsmLocker{c: bsm.New(nodes[0]), retry: retry}, nil
	}
}

func (b *bsmLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (lockbench.Held, error) {
	l, err := b.c.Obtain(ctx, key, ttl, &bsm.Options{RetryStrategy: b.retry()})
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, bsm.ErrNotObtained), ctx.Err() != nil:
		return nil, errors.Join(lockbench.ErrBusy, err)
	}
	return nil, err
}

func (b *bsmLocker) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) error {
	l, err := b.c.Obtain(ctx, key, ttl, nil)
	if err != nil {
		return err
	}
	refresh := func(ctx context.Context) error { return l.Refresh(ctx, ttl, nil) }
	return lockbench.ManualRenew(ctx, ttl, refresh, l.Release, fn)
}

func (b *bsmLocker) Close() error { return nil }

// ---- go-redsync/redsync ----

type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

type redsyncHeld struct{ m *redsync.Mutex }

func (h redsyncHeld) Release(ctx context.Context) error {
	_, err := h.m.UnlockContext(ctx)
	return err
}

func redsyncWith(opts ...redsync.Option) func([]redis.UniversalClient) (lockbench.Locker, error) {
	return func(nodes []redis.UniversalClient) (lockbench.Locker, error) {
		pools := make([]redsyncredis.Pool, len(nodes))
		for i, n := range nodes {
			pools[i] = goredis.NewPool(n)
		}
		return &redsyncLocker{rs: redsync.New(pools...), opts: opts}, nil
	}
}

func (r *redsyncLocker) mutex(key string, ttl time.Duration) *redsync.Mutex {
	return r.rs.NewMutex(key, append([]redsync.Option{redsync.WithExpiry(ttl)}, r.opts...)...)
}

func isTaken(err error) bool {
	var t *redsync.ErrTaken
	var nt *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &t) || errors.As(err, &nt)
}

func (r *redsyncLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (lockbench.Held, error) {
	m := r.mutex(key, ttl)
	err := m.LockContext(ctx)
	switch {
	case err == nil:
		return redsyncHeld{m}, nil
	case isTaken(err), ctx.Err() != nil:
		return nil, errors.Join(lockbench.ErrBusy, err)
	}
	return nil, err
}

func (r *redsyncLocker) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) error {
	m := r.mutex(key, ttl)
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	refresh := func(ctx context.Context) error {
		ok, err := m.ExtendContext(ctx)
		if err == nil && !ok {
			err = redsync.ErrExtendFailed
		}
		return err
	}
	return lockbench.ManualRenew(ctx, ttl, refresh, redsyncHeld{m}.Release, fn)
}

func (r *redsyncLocker) Close() error { return nil }
