package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// Run keeps the lock past its TTL while fn works, then releases it.
func TestRunRenews(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		var fence int64
		const ttl = time.Second // renewals get through on a loaded machine
		err := c.Run(ctx, "renew", ttl, func(ctx context.Context, l *redislock.Lock) error {
			fence = l.Fence()
			// Renewed until the lease reaches two TTLs past now.
			for end := time.Now().Add(2 * ttl); !l.ValidUntil().After(end); {
				renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				if _, err := c.Obtain(context.Background(), "renew", time.Second); !errors.Is(err, redislock.ErrNotObtained) {
					return errors.New("lock was free while Run held it")
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.NotEqual(t, int64(0), fence, "fn not called")
		require.False(t, held(ctx, b.rdb, redislock.DefaultPrefix+"{renew}"), "Run did not release")
	})
}

// Run ends fn before the lease ends while the server is paused: loss
// detection does not wait for a stuck Redis call.
func TestRunStopsWhileServerPaused(t *testing.T) {
	srv := redistest.Start(t)
	// Long read timeout: a renewal call blocks for the whole pause.
	rdb := srv.Client(func(o *redis.Options) { o.ReadTimeout = 5 * time.Second })
	c := newClient(t, rdb)
	admin := srv.Client(nil)
	ctx := testkit.Context(t)
	require.NoError(t, admin.Ping(ctx).Err())
	var cancelledAt, validAt atomic.Int64
	base := time.Now()
	err := c.Run(ctx, "paused", 300*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		// When the ctx ends, not when fn, busy with the pause, looks.
		context.AfterFunc(ctx, func() { cancelledAt.Store(int64(time.Since(base))) })
		if err := admin.Do(ctx, "CLIENT", "PAUSE", 1500, "ALL").Err(); err != nil {
			return err
		}
		<-ctx.Done()
		validAt.Store(int64(l.ValidUntil().Sub(base)))
		return nil
	})
	// The error names the cause: the lease ran out before a renewal got
	// through (not a grant that came back late).
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost with ErrLeaseExpired")
	require.ErrorIs(t, err, redislock.ErrLeaseExpired, "Run, want ErrLockLost with ErrLeaseExpired")
	require.NotErrorIs(t, err, redislock.ErrGrantExpired, "Run, want ErrLockLost with ErrLeaseExpired")
	// The cancel fires from a timer set to ValidUntil. Waiting for the
	// stuck renewal would make it 1.2 s late at least (the pause's end);
	// the 500 ms are scheduling slack for a loaded machine, not a speed
	// requirement.
	require.LessOrEqual(t, time.Duration(cancelledAt.Load()-validAt.Load()), 500*time.Millisecond, "fn cancelled after the last confirmed validity")
}

func TestRunObtainError(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		l, err := c.Obtain(ctx, "taken", time.Second)
		require.NoError(t, err)
		defer l.Release(ctx)
		called := false
		err = c.Run(ctx, "taken", time.Second, func(context.Context, *redislock.Lock) error { called = true; return nil })
		require.ErrorIs(t, err, redislock.ErrNotObtained, "Run on a held lock (fn called: %v)", called)
		require.False(t, called, "Run on a held lock = %v (fn called: %v)", err, called)
	})
}

// A panic in fn releases the lock (and stops the renewal) before it goes on
// up the stack: a handler panic that net/http recovers leaves nothing held.
func TestRunReleasesOnPanic(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					require.Fail(t, fmt.Sprintf("recovered %v, want fn's panic", r))
				}
			}()
			_ = c.Run(ctx, "panics", 10*time.Second, func(context.Context, *redislock.Lock) error { panic("boom") })
		}()
		l, err := c.Obtain(ctx, "panics", time.Second) // one attempt: it must be free
		require.NoError(t, err, "Obtain after fn panicked")
		_ = l.Release(ctx)
	})
}

// deadServer is a redis-server that the test kills, reached by a client
// whose connections to it are refused, and once the test closes the gate,
// refused only when the test lets them go: a release that waited for the
// dead server would wait for the watchdog.
func deadServer(t *testing.T) (srv *redistest.Server, rdb *redis.Client, w *watchdog, slow func()) {
	srv = redistest.Start(t)
	gate := make(chan struct{})
	var gated atomic.Bool
	w = newWatchdog(t, 20*time.Second, func() { close(gate) })
	rdb = srv.Client(func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = patience, patience, patience, patience
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if gated.Load() {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	return srv, rdb, w, func() { gated.Store(true) }
}

// Redis unreachable when fn returns, the lock still valid: Run returns
// without waiting for the release.
func TestRunReturnsWhenRedisUnreachable(t *testing.T) {
	t.Parallel()
	srv, rdb, w, slow := deadServer(t)
	renewed := newRenewals()
	c := redislock.New(rdb, redislock.WithReleaseTimeout(patience), redislock.WithObserver(renewed))
	t.Cleanup(func() {
		w.release()
		_ = c.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	err := c.Run(ctx, "down", patience, func(ctx context.Context, l *redislock.Lock) error {
		srv.Kill()
		<-renewed.failed // a renewal did not get through; the lease is still valid
		slow()
		return ctx.Err()
	}, redislock.WithRefreshInterval(10*time.Millisecond))
	require.NoError(t, err, "Run")
	require.False(t, w.fired.Load(), "Run waited for a release on the unreachable server")
}

// A Release inside Run's fn gives the lock up early: fn's ctx is done when
// the Release returns (cause ErrReleased), another client takes the lock
// while fn goes on, Run does not release again (the other client's lock
// stays), and Run returns ErrReleased with fn's error, not nil. Single
// mode (batched renewal), quorum mode (renewal by Refresh) and RunMulti.
func TestRunReleaseInsideFn(t *testing.T) {
	t.Parallel()
	fnErr := errors.New("fn went on")
	check := func(t *testing.T, run func(fn func(ctx context.Context, release func() error) error) error, other func() (release func() error, err error)) {
		t.Helper()
		var otherRelease func() error
		err := run(func(fctx context.Context, release func() error) error {
			require.NoError(t, release())
			assert.Error(t, fctx.Err(), "fn's ctx not done after the Release")
			assert.ErrorIs(t, context.Cause(fctx), redislock.ErrReleased)
			var err error
			otherRelease, err = other()
			require.NoError(t, err, "another client while fn goes on")
			return fnErr
		})
		assert.ErrorIs(t, err, redislock.ErrReleased)
		assert.ErrorIs(t, err, fnErr)
		assert.NotErrorIs(t, err, redislock.ErrLockLost)
		require.NotNil(t, otherRelease)
		assert.NoError(t, otherRelease(), "the other client's lock, after Run returned")
	}
	runLock := func(c *redislock.Client, ctx context.Context, key string) func(fn func(context.Context, func() error) error) error {
		return func(fn func(context.Context, func() error) error) error {
			return c.Run(ctx, key, 10*time.Second, func(ctx context.Context, l *redislock.Lock) error {
				return fn(ctx, func() error { return l.Release(ctx) })
			})
		}
	}
	obtain := func(c *redislock.Client, ctx context.Context, key string) func() (func() error, error) {
		return func() (func() error, error) {
			l, err := c.Obtain(ctx, key, 10*time.Second)
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(ctx) }, nil
		}
	}
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
		c := newClient(t, b.rdb)
		check(t, runLock(c, ctx, "rel"), obtain(newClient(t, b.rdb), ctx, "rel"))
		keys := []string{"rel-a", "rel-b"}
		check(t, func(fn func(context.Context, func() error) error) error {
			return c.RunMulti(ctx, keys, 10*time.Second, func(ctx context.Context, m *redislock.MultiLock) error {
				return fn(ctx, func() error { return m.Release(ctx) })
			})
		}, func() (func() error, error) {
			m, err := newClient(t, b.rdb).ObtainMulti(ctx, keys, 10*time.Second)
			if err != nil {
				return nil, err
			}
			return func() error { return m.Release(ctx) }, nil
		})
	})
	t.Run("quorum", func(t *testing.T) {
		t.Parallel()
		q := startQuorum(t, 3)
		ctx := testkit.Context(t)
		check(t, runLock(q.client(t), ctx, "rel"), obtain(q.client(t), ctx, "rel"))
	})
}
