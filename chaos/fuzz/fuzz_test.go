package fuzz

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/lease/backend"
)

// Fuzz targets for key, option and TTL handling, through the public API
// against miniredis (fast, no process to leak). The seed corpus lives in
// testdata/fuzz; `go test` runs it, `go test -fuzz` explores further.

func fuzzRedis(f *testing.F) (*miniredis.Miniredis, *redis.Client) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(m.Close)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	f.Cleanup(func() { _ = rdb.Close() })
	return m, rdb
}

// FuzzObtainInput: any key, TTL and prefix. Bad input is refused with
// ErrInvalidArgument before any Redis command; good input is granted with a
// positive fence and a ValidUntil within the TTL, released, and leaves the
// key free. Never a panic, never ErrNotObtained on a free key.
func FuzzObtainInput(f *testing.F) {
	f.Add("job", int64(time.Second), "redislock:")
	f.Add("", int64(time.Second), "redislock:")
	f.Add("k", int64(0), "")
	f.Add("k", int64(-1), "p:")
	f.Add("k", int64(999*time.Microsecond), "p:")
	f.Add("k", int64(2*time.Millisecond), "p:")
	f.Add("k}{x%7D", int64(3*time.Millisecond), "p:")
	f.Add("\x00\xff binary", int64(time.Hour), "p{")
	f.Add("k", int64(1<<62), "redislock:")
	m, rdb := fuzzRedis(f)
	f.Fuzz(func(t *testing.T, key string, ttlNs int64, prefix string) {
		if len(key) > 1<<16 || len(prefix) > 256 {
			return
		}
		ttl := time.Duration(ttlNs)
		m.FlushAll() // the previous input's client is closed: its clean-up is done
		c := redislock.New(rdb, redislock.WithPrefix(prefix))
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		before := m.CommandCount()
		start := time.Now()
		l, err := c.Obtain(ctx, key, ttl)
		end := time.Now()
		mustRefuse := key == "" || ttl < time.Millisecond || strings.ContainsAny(prefix, "{}")
		// With a validity of a few ms the round trip can outlive it: the
		// grant is withdrawn (ErrGrantExpired) or the request times out (the
		// node timeout is the validity). Both are correct for tiny TTLs.
		shortLived := ttl < 100*time.Millisecond
		if shortLived && (errors.Is(err, redislock.ErrGrantExpired) || errors.Is(err, context.DeadlineExceeded)) {
			return
		}
		if err != nil {
			require.ErrorIs(t, err, redislock.ErrInvalidArgument, "Obtain(%q, %v, prefix %q) (want a grant or ErrInvalidArgument)", key, ttl, prefix)
			if n := m.CommandCount() - before; n != 0 {
				t.Fatalf("Obtain(%q, %v, prefix %q) refused after %d Redis commands: %v", key, ttl, prefix, n, err)
			}
			return
		}
		require.False(t, mustRefuse, "Obtain(%q, %v, prefix %q) granted bad input", key, ttl, prefix)
		require.Equal(t, key, l.Key(), "grant: key %q fence %d token %q", l.Key(), l.Fence(), l.Token())
		require.Greater(t, l.Fence(), int64(0), "grant: key %q fence %d token %q", l.Key(), l.Fence(), l.Token())
		require.NotEqual(t, "", l.Token(), "grant: key %q fence %d token %q", l.Key(), l.Fence(), l.Token())
		// The validity counts from a moment within the call (before the
		// request went out), less the drift: the call's own work before
		// sending may outlast a tiny TTL's drift, so start+ttl is no bound.
		lo := backend.ValidUntil(start, ttl, redislock.DefaultDriftFactor)
		hi := backend.ValidUntil(end, ttl, redislock.DefaultDriftFactor)
		if vu := l.ValidUntil(); vu.Before(lo) || vu.After(hi) {
			t.Fatalf("ValidUntil start%+v outside [start+%v, end+%v] (end = start%+v)", vu.Sub(start), lo.Sub(start), hi.Sub(end), end.Sub(start))
		}
		if d, err := l.TTL(ctx); (err != nil || d > ttl || d <= 0) && !shortLived {
			t.Fatalf("TTL: %v %v (ttl %v)", d, err, ttl)
		}
		require.NoError(t, l.Release(ctx), "Release")
		l2, err := c.Obtain(ctx, key, ttl)
		if shortLived && (errors.Is(err, redislock.ErrGrantExpired) || errors.Is(err, context.DeadlineExceeded)) {
			return
		}
		require.NoError(t, err, "key not free after Release")
		require.Greater(t, l2.Fence(), l.Fence(), "fence went backwards: %d then %d", l.Fence(), l2.Fence())
		_ = l2.Release(ctx)
	})
}

// FuzzRetryOptions: any retry parameters. Valid ones keep their contract
// (waits within bounds, LimitRetry stops after max); invalid ones are
// refused by Obtain with ErrInvalidArgument, never a panic or a hang.
func FuzzRetryOptions(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), 3, 5)
	f.Add(int64(0), int64(0), 0, 0)
	f.Add(int64(-1), int64(1), -1, 1)
	f.Add(int64(5), int64(1), 2, 1<<30)
	f.Add(int64(1), int64(1<<62), 100, 61)
	_, rdb := fuzzRedis(f)
	c := redislock.New(rdb)
	f.Cleanup(func() { _ = c.Close() })
	held, err := c.Obtain(context.Background(), "held", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = held.Release(context.Background()) })
	f.Fuzz(func(t *testing.T, minNs, maxNs int64, limit, attempt int) {
		lo, hi := time.Duration(minNs), time.Duration(maxNs)
		exp := redislock.ExponentialBackoff(lo, hi)
		lin := redislock.LinearBackoff(lo)
		lim := redislock.LimitRetry(exp, limit)
		validExp := lo > 0 && hi >= lo
		if validExp && attempt >= 0 {
			for _, a := range []int{attempt, attempt + 1} {
				if w, ok := exp.Backoff(a); !ok || w < lo || w > hi {
					t.Fatalf("ExponentialBackoff(%v,%v).Backoff(%d) = %v %v", lo, hi, a, w, ok)
				}
			}
			if limit >= 0 {
				if _, ok := lim.Backoff(limit + 1); ok && limit+1 > limit {
					t.Fatalf("LimitRetry(max %d) allowed attempt %d", limit, limit+1)
				}
			}
		}
		if lo > 0 {
			if w, ok := lin.Backoff(attempt); !ok || w != lo {
				t.Fatalf("LinearBackoff(%v) = %v %v", lo, w, ok)
			}
		}
		// Through Obtain on a held lock: bounded by a short context.
		for _, s := range []redislock.RetryStrategy{exp, lin, lim} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_, err := c.Obtain(ctx, "held", time.Second, redislock.WithRetry(s))
			cancel()
			switch {
			case errors.Is(err, redislock.ErrInvalidArgument):
			case errors.Is(err, redislock.ErrNotObtained):
			case errors.Is(err, context.DeadlineExceeded): // the ctx ended the attempt itself
			default:
				t.Fatalf("Obtain with %#v on a held lock: %v", s, err)
			}
		}
	})
}
