package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// Bad input is refused with ErrInvalidArgument before any call to Redis.
func TestInvalidInput(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	ctx := testkit.Context(t)

	cases := map[string]func() error{
		"empty key":        func() error { _, err := c.Obtain(ctx, "", time.Second); return err },
		"zero TTL":         func() error { _, err := c.Obtain(ctx, "k", 0); return err },
		"negative TTL":     func() error { _, err := c.Obtain(ctx, "k", -time.Second); return err },
		"sub-ms TTL":       func() error { _, err := c.Obtain(ctx, "k", 999*time.Microsecond); return err },
		"TTL within drift": func() error { _, err := c.Obtain(ctx, "k", 2*time.Millisecond); return err },
		"nil ctx":          func() error { var nilCtx context.Context; _, err := c.Obtain(nilCtx, "k", time.Second); return err },
		"nil retry":        func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithRetry(nil)); return err },
		"zero linear backoff": func() error {
			_, err := c.Obtain(ctx, "k", time.Second, redislock.WithRetry(redislock.LinearBackoff(0)))
			return err
		},
		"bad exponential": func() error {
			_, err := c.Obtain(ctx, "k", time.Second, redislock.WithRetry(redislock.ExponentialBackoff(time.Second, time.Millisecond)))
			return err
		},
		"negative limit": func() error {
			_, err := c.Obtain(ctx, "k", time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.NoRetry(), -1)))
			return err
		},
		"prefix with brace": func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithPrefix("a{")); return err },
		"drift factor 1":    func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithDriftFactor(1)); return err },
		"drift factor NaN": func() error {
			_, err := c.Obtain(ctx, "k", time.Second, redislock.WithDriftFactor(func() float64 { var z float64; return z / z }()))
			return err
		},
		"zero node timeout":     func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithNodeTimeout(0)); return err },
		"zero release timeout":  func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithReleaseTimeout(0)); return err },
		"zero max wait":         func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithMaxWait(-1)); return err },
		"zero refresh interval": func() error { _, err := c.Obtain(ctx, "k", time.Second, redislock.WithRefreshInterval(0)); return err },
		"nil client":            func() error { _, err := redislock.New(nil).Obtain(ctx, "k", time.Second); return err },
		"client with bad option": func() error {
			_, err := redislock.New(rdb, redislock.WithDriftFactor(-1)).Obtain(ctx, "k", time.Second)
			return err
		},
		"run nil fn": func() error { return c.Run(ctx, "k", time.Second, nil) },
		"run interval too long": func() error {
			return c.Run(ctx, "k", time.Second, func(context.Context, *redislock.Lock) error { return nil }, redislock.WithRefreshInterval(time.Second))
		},
		"run zero TTL": func() error {
			return c.Run(ctx, "k", 0, func(context.Context, *redislock.Lock) error { return nil })
		},
		"quorum empty": func() error { _, err := redislock.NewQuorum(nil); return err },
		"quorum nil":   func() error { _, err := redislock.NewQuorum([]redis.UniversalClient{rdb, nil}); return err },
		"quorum twice": func() error { _, err := redislock.NewQuorum([]redis.UniversalClient{rdb, rdb}); return err },
		"quorum bad option": func() error {
			_, err := redislock.NewQuorum([]redis.UniversalClient{rdb}, redislock.WithNodeTimeout(-1))
			return err
		},
		"fenced set empty key":  func() error { return redislock.FencedSet(ctx, rdb, "", "v", 1, 0) },
		"fenced set zero fence": func() error { return redislock.FencedSet(ctx, rdb, "r", "v", 0, 0) },
		"fenced set bad TTL":    func() error { return redislock.FencedSet(ctx, rdb, "r", "v", 1, time.Microsecond) },
	}
	before := m.CommandCount()
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			err := f()
			require.ErrorIs(t, err, redislock.ErrInvalidArgument, "got, want ErrInvalidArgument")
			require.NotErrorIs(t, err, redislock.ErrNotObtained, "invalid input reported as contention")
		})
	}
	require.Equal(t, 0, m.CommandCount()-before, "invalid input sent commands to Redis")

	t.Run("refresh", func(t *testing.T) {
		l, err := c.Obtain(ctx, "r", 10*time.Second)
		require.NoError(t, err)
		defer l.Release(ctx)
		before := m.CommandCount()
		for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
			require.ErrorIs(t, l.Refresh(ctx, ttl), redislock.ErrInvalidArgument, "Refresh(%v), want ErrInvalidArgument", ttl)
		}
		require.Equal(t, 0, m.CommandCount()-before, "invalid Refresh sent commands")
		ttl, err := l.TTL(ctx)
		require.NoError(t, err, "lock damaged by invalid Refresh: %v", ttl)
		require.Greater(t, ttl, time.Duration(0), "lock damaged by invalid Refresh %v", err)
	})
}

// Obtain and Run (ObtainMulti and RunMulti) judge a call's TTL and options
// alike: what one refuses as invalid, so does the other.
func TestObtainAndRunValidateAlike(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := testkit.Context(t)
	cases := []struct {
		ttl  time.Duration
		opts []redislock.Option
	}{
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(2 * time.Second)}},
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(time.Second)}},
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(985 * time.Millisecond)}},
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(500 * time.Millisecond)}},
		{10 * time.Millisecond, []redislock.Option{redislock.WithDriftFactor(0.5)}},
		{3 * time.Millisecond, nil},
		{4 * time.Millisecond, nil},
		{time.Second, nil},
	}
	for _, tc := range cases {
		obtained := func() error {
			l, err := c.Obtain(ctx, "alike", tc.ttl, tc.opts...)
			if err == nil {
				_ = l.Release(ctx)
			}
			return err
		}()
		ran := c.Run(ctx, "alike", tc.ttl, func(context.Context, *redislock.Lock) error { return nil }, tc.opts...)
		multi := func() error {
			m, err := c.ObtainMulti(ctx, []string{"alike-a", "alike-b"}, tc.ttl, tc.opts...)
			if err == nil {
				_ = m.Release(ctx)
			}
			return err
		}()
		ranMulti := c.RunMulti(ctx, []string{"alike-a", "alike-b"}, tc.ttl, func(context.Context, *redislock.MultiLock) error { return nil }, tc.opts...)
		verdicts := []bool{}
		for _, err := range []error{obtained, ran, multi, ranMulti} {
			verdicts = append(verdicts, errors.Is(err, redislock.ErrInvalidArgument))
		}
		for _, v := range verdicts[1:] {
			if v != verdicts[0] {
				assert.Fail(t, fmt.Sprintf("TTL %v with %d options: Obtain %v, Run %v, ObtainMulti %v, RunMulti %v: not alike", tc.ttl, len(tc.opts), obtained, ran, multi, ranMulti))
				break
			}
		}
	}
}

// A TTL that leaves less validity than Redis' own expiry precision (1 ms)
// is refused, and the error says it is too short.
func TestTooShortTTLSaysSo(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "short", 3*time.Millisecond)
	if err == nil {
		_ = l.Release(ctx)
	}
	require.ErrorIs(t, err, redislock.ErrInvalidArgument, "Obtain with a 3ms TTL, want ErrInvalidArgument saying the TTL is too short")
	require.Contains(t, err.Error(), "too short", "Obtain with a 3ms TTL = %v, want ErrInvalidArgument saying the TTL is too short", err)
}

// Every TTL accepted gives a ValidUntil with Go's monotonic clock reading,
// up to lease.MaxTTL (quorum mode and Refresh alike); a longer one (one
// whose validity would reach past 2157, where time.Time keeps none) is
// refused as invalid before any call to Redis, by Obtain, Run, Refresh and
// ObtainMulti.
func TestMaxTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	q := startQuorum(t, 3)
	ctx := testkit.Context(t)
	monotonic := func(tm time.Time) bool { return strings.Contains(tm.String(), " m=+") }
	for _, mode := range []struct {
		name   string
		client *redislock.Client
	}{{"single", newClient(t, srv.Client(nil))}, {"quorum", q.client(t)}} {
		t.Run(mode.name, func(t *testing.T) {
			c := mode.client
			l, err := c.Obtain(ctx, "longest", redislock.MaxTTL)
			require.NoError(t, err)
			assert.True(t, monotonic(l.ValidUntil()), "ValidUntil %v carries no monotonic reading", l.ValidUntil())
			require.NoError(t, l.Refresh(ctx, redislock.MaxTTL))
			vu := l.ValidUntil()
			assert.True(t, monotonic(vu), "ValidUntil %v after Refresh carries no monotonic reading", vu)
			for _, ttl := range []time.Duration{redislock.MaxTTL + time.Millisecond, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
				assert.ErrorIs(t, l.Refresh(ctx, ttl), redislock.ErrInvalidArgument, "Refresh(%v)", ttl)
			}
			assert.True(t, l.ValidUntil().Equal(vu), "a refused Refresh changed the validity")
			require.NoError(t, l.Release(ctx))
		})
	}
	// Refused before any call: a Client on a port where no Redis listens
	// would report that instead.
	downRDB := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = downRDB.Close() })
	down := newClient(t, downRDB)
	for _, ttl := range []time.Duration{redislock.MaxTTL + time.Millisecond, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		l, err := down.Obtain(ctx, "too-long", ttl)
		assert.Nil(t, l)
		assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "Obtain(%v)", ttl)
		assert.ErrorIs(t, down.Run(ctx, "too-long", ttl, func(context.Context, *redislock.Lock) error { return nil }),
			redislock.ErrInvalidArgument, "Run(%v)", ttl)
		_, err = down.ObtainMulti(ctx, []string{"a", "b"}, ttl)
		assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "ObtainMulti(%v)", ttl)
	}
}
