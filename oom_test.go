package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// Memory full (maxmemory with noeviction): Redis refuses every write that
// needs memory, and accepts DEL, which frees it.

// startFull starts a redis-server whose memory can be filled (fill):
// maxmemory 1 byte, noeviction, so that every write that needs memory is
// refused from then on.
func startFull(t *testing.T) (rdb *redis.Client, fill func()) {
	t.Helper()
	if !redistest.Available(t) {
		t.Skip("redis-server not found")
	}
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	rdb = srv.Client(nil)
	return rdb, func() {
		t.Helper()
		require.NoError(t, rdb.ConfigSet(context.Background(), "maxmemory", "1").Err())
		require.ErrorContains(t, rdb.Set(context.Background(), "probe", "x", 0).Err(), "OOM", "memory full")
	}
}

// waitFor starts an Obtain on key by c that waits (notified, with a backoff
// of a minute) and returns its outcome on a channel, once the waiter is
// queued and has made its attempt and its recheck (two scripts on rdb's
// server; a third when the call learns the script's digest).
func waitFor(t *testing.T, ctx context.Context, c *redislock.Client, rdb *redis.Client, key string) <-chan error {
	t.Helper()
	before := evalCalls(rdb)
	done := make(chan error, 1)
	go func() {
		l, err := c.Obtain(ctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
		if err == nil {
			_ = l.Release(ctx)
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		n, ready := redislock.LocalWaiters(c, key)
		return n == 1 && ready && evalCalls(rdb)-before >= 2
	}, 5*time.Second, 5*time.Millisecond, "the waiter queued, its attempt and recheck made")
	return done
}

// A Release while a caller of the same Client waits (a handoff) frees the
// lock when memory is full: the grant to the waiter cannot be written, the
// release deletes the key, and the waiter, woken, tries again and gets
// Redis' error (a free lock that cannot be granted is no contention).
func TestOOMReleaseWithWaiter(t *testing.T) {
	t.Parallel()
	rdb, fill := startFull(t)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "oom", time.Minute)
	require.NoError(t, err)
	waiter := waitFor(t, ctx, c, rdb, "oom")
	fill()
	require.NoError(t, l.Release(ctx), "Release with a waiter, memory full")
	assert.False(t, held(ctx, rdb, redislock.LockKey("oom")), "lock still held after Release")
	assert.True(t, l.ValidUntil().IsZero())
	err = <-waiter
	require.Error(t, err, "the waiter was granted a lock that Redis could not write")
	assert.NotErrorIs(t, err, redislock.ErrNotObtained)
	assert.ErrorContains(t, err, "OOM")
}

// Run whose release is a handoff returns nil with the lock freed when
// memory is full.
func TestOOMRunWithWaiter(t *testing.T) {
	t.Parallel()
	rdb, fill := startFull(t)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	var waiter <-chan error
	err := c.Run(ctx, "oom-run", time.Minute, func(ctx context.Context, l *redislock.Lock) error {
		waiter = waitFor(t, ctx, c, rdb, "oom-run")
		fill()
		return nil
	})
	require.NoError(t, err, "Run with a waiter, memory full")
	assert.False(t, held(ctx, rdb, redislock.LockKey("oom-run")), "Run returned with its lock held")
	require.Error(t, <-waiter)
}

// Contention stays ErrNotObtained when memory is full: an attempt that
// finds the lock held cannot mark it wanted (APPEND), nor join a fair
// queue (ZADD), and still reports contention, for every attempt a retry
// strategy makes.
func TestOOMContention(t *testing.T) {
	t.Parallel()
	rdb, fill := startFull(t)
	holder := newClient(t, rdb)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	for _, key := range []string{"busy", "busy-fair", "busy-multi"} {
		_, err := holder.Obtain(ctx, key, time.Minute)
		require.NoError(t, err)
	}
	fill()
	retry := redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 3))
	for name, opts := range map[string][]redislock.Option{
		"busy":      nil,
		"busy-fair": {redislock.WithFair(true)},
	} {
		_, err := c.Obtain(ctx, name, time.Minute, opts...)
		assert.ErrorIs(t, err, redislock.ErrNotObtained, name)
		_, err = c.Obtain(ctx, name, time.Minute, append(opts, retry)...)
		assert.ErrorIs(t, err, redislock.ErrNotObtained, name+", with retries")
	}
	_, err := c.ObtainMulti(ctx, []string{"free", "busy-multi"}, time.Minute, retry)
	assert.ErrorIs(t, err, redislock.ErrNotObtained, "ObtainMulti")
}
