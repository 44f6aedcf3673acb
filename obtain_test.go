package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/require"
)

// Keys are binary-safe and namespaced; a lock's keys share a hash tag.
func TestKeys(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		keys := []string{"plain", "a}b", "}x", "{y}", "%7D", "}", "bin\x00\xff\r\n", strings.Repeat("k", 64<<10)}
		locks := map[string]*redislock.Lock{}
		for _, k := range keys {
			l, err := c.Obtain(ctx, k, time.Second)
			require.NoError(t, err, "Obtain(%q)", k[:min(len(k), 20)])
			require.Equal(t, k, l.Key(), "Key() does not round-trip")
			locks[k] = l
		}
		all, err := b.rdb.Keys(ctx, "*").Result()
		require.NoError(t, err)
		require.Equal(t, len(keys), len(all), "Redis keys for %d locks", len(keys))
		for _, k := range all {
			require.True(t, strings.HasPrefix(k, redislock.DefaultPrefix+"{"), "key %q not namespaced", k[:min(len(k), 40)])
			require.NotEqual(t, "", hashTag(k), "key %q has no hash tag", k[:min(len(k), 40)])
		}
		for k, l := range locks {
			lockKey := redislock.DefaultPrefix + "{" + strings.NewReplacer("%", "%25", "}", "%7D").Replace(k) + "}"
			require.Equal(t, hashTag(lockKey+":wake"), hashTag(lockKey), "lock %q: key missing or its channel in another slot", k[:min(len(k), 20)])
			require.Equal(t, int64(1), b.rdb.Exists(ctx, lockKey).Val(), "lock %q: key missing or its channel in another slot", k[:min(len(k), 20)])
			require.NoError(t, l.Release(ctx))
		}
		c2 := newClient(t, b.rdb, redislock.WithPrefix("other:"))
		l, err := c2.Obtain(ctx, "plain", time.Second)
		require.NoError(t, err)
		defer l.Release(ctx)
		require.Equal(t, int64(1), b.rdb.Exists(ctx, "other:{plain}").Val(), "WithPrefix not applied")
	})
}

// hashTag is the part of key that Redis Cluster hashes.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

// The retry loop ends with the ctx, reporting both causes.
func TestRetryBoundedByContext(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		l, err := c.Obtain(ctx, "busy", 10*time.Second)
		require.NoError(t, err)
		defer l.Release(ctx)

		// (Long enough for the first attempt to find the lock held on a
		// loaded machine: a ctx that ends the first attempt itself is the
		// ctx's error, not contention.)
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err = c.Obtain(short, "busy", time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
		require.ErrorIs(t, err, redislock.ErrNotObtained, "got, want ErrNotObtained joined with DeadlineExceeded")
		require.ErrorIs(t, err, context.DeadlineExceeded, "got, want ErrNotObtained joined with DeadlineExceeded")
		// Cancelled once it waits.
		cctx, cancel2 := context.WithCancel(ctx)
		cw := newClient(t, b.rdb, redislock.WithObserver(onWait(cancel2)))
		_, err = cw.Obtain(cctx, "busy", time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
		require.ErrorIs(t, err, redislock.ErrNotObtained, "got, want ErrNotObtained joined with Canceled")
		require.ErrorIs(t, err, context.Canceled, "got, want ErrNotObtained joined with Canceled")
		// Without a ctx deadline, WithMaxWait bounds the loop.
		_, err = c.Obtain(context.Background(), "busy", time.Second,
			redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)), redislock.WithMaxWait(30*time.Millisecond))
		require.ErrorIs(t, err, redislock.ErrNotObtained, "got, want ErrNotObtained")
		// LimitRetry bounds it too.
		_, err = c.Obtain(ctx, "busy", time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 3)))
		require.ErrorIs(t, err, redislock.ErrNotObtained, "got, want plain ErrNotObtained")
		require.NotErrorIs(t, err, context.DeadlineExceeded, "got, want plain ErrNotObtained")
	})
}

// A grant or refresh whose reply comes back after its validity is refused
// with ErrGrantExpired: the reply is held back by the proxy until the
// validity (TTL 10 s, drift factor 0.9: 998 ms from the request, time
// enough for the other calls on a loaded machine) has passed for sure,
// while the key lives on in Redis for the TTL. The late grant,
// and the lock of a late refresh, are released.
func TestLateReplyRefused(t *testing.T) {
	t.Parallel()
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	admin := srv.Client(nil)
	const ttl = 10 * time.Second
	c := newClient(t, rdb, redislock.WithDriftFactor(0.9), redislock.WithNodeTimeout(time.Minute))
	ctx := testkit.Context(t)
	validity := ttl - time.Duration(0.9*float64(ttl)) - 2*time.Millisecond

	// late runs op with the replies held back until the validity of a
	// request sent now has passed.
	late := func(op func() error) error {
		t.Helper()
		sent := p.HoldReplies()
		done := make(chan error, 1)
		go func() { done <- op() }()
		at := <-sent // the call started before its request got here
		// A sleep: the client measures the validity on the wall clock,
		// and the point is that it has passed when the reply comes.
		time.Sleep(time.Until(at.Add(validity + time.Millisecond)))
		p.Let()
		return <-done
	}

	warm, err := c.Obtain(ctx, "late", ttl) // loads the scripts: one round trip each
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	var l *redislock.Lock
	err = late(func() (err error) {
		l, err = c.Obtain(ctx, "late", ttl)
		return err
	})
	require.ErrorIs(t, err, redislock.ErrGrantExpired, "Obtain with a late reply = %v, want ErrGrantExpired", l)
	require.Nil(t, l, "Obtain with a late reply, %v, want ErrGrantExpired", err)
	// The error says why: how long the call took, and that a longer TTL
	// leaves room for it.
	msg := err.Error()
	require.Contains(t, msg, "took", "ErrGrantExpired gives no hint")
	require.Contains(t, msg, "longer TTL", "ErrGrantExpired gives no hint")
	v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val()
	require.True(t, strings.HasPrefix(v, "~:"), "after the late grant the lock key holds %q, want it released", v)

	l, err = c.Obtain(ctx, "late", ttl)
	require.NoError(t, err)
	require.ErrorIs(t, late(func() error { return l.Refresh(ctx, ttl) }), redislock.ErrGrantExpired, "Refresh with a late reply, want ErrGrantExpired")
	require.True(t, l.ValidUntil().IsZero(), "after a late refresh ValidUntil = %v, want zero (not held)", l.ValidUntil())
	v = admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val()
	require.True(t, strings.HasPrefix(v, "~:"), "after the late refresh the lock key holds %q, want it released", v)
}

// A retrying waiter gets the lock once the holder releases it.
func TestRetryObtainsAfterRelease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
		l, err := newClient(t, b.rdb).Obtain(ctx, "handoff", 10*time.Second)
		require.NoError(t, err)
		// Released once the waiter waits.
		c := newClient(t, b.rdb, redislock.WithObserver(onWait(func() { go l.Release(ctx) })))
		l2, err := c.Obtain(ctx, "handoff", time.Second, redislock.WithRetry(redislock.ExponentialBackoff(time.Millisecond, 10*time.Millisecond)))
		require.NoError(t, err)
		_ = l2.Release(ctx)
	})
}
