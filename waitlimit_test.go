package redislock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// Waiters without a ctx deadline do not give up on a holder that is alive
// and renewing its lease (of 1 s: renewals that get through on a loaded
// machine) for several of the waiters' TTLs: the default wait limit is far
// longer than one TTL.
func TestWaitOutlivesRenewingHolder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	renewed := newRenewals()
	holder := newClient(t, srv.Client(nil), redislock.WithObserver(renewed))
	waiters := newClient(t, srv.Client(nil))
	const ttl = 300 * time.Millisecond // the waiters'
	locked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := holder.Run(context.Background(), "fill", time.Second, func(ctx context.Context, l *redislock.Lock) error {
			close(locked)
			// The fill: renewed until the lease reaches 2 s past now, six
			// of the waiters' TTLs.
			for end := time.Now().Add(2 * time.Second); !l.ValidUntil().After(end); {
				select {
				case <-renewed.ok:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		assert.NoError(t, err)
	})
	<-locked
	errs := make(chan error, 8)
	for range cap(errs) {
		wg.Go(func() {
			l, err := waiters.Obtain(context.Background(), "fill", ttl, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
			if err == nil {
				err = l.Release(context.Background())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a waiter gave up on a live holder")
	}
}

// WithMaxWait is a cap: a waiter whose limit passes while the holder's
// lease, seen about to end within the TTL the waiter asks for, still runs
// gives up then, with a *WaitLimitError carrying that lease, instead of
// waiting for the lease to end (the holder, alive, renews it). It returns
// while the holder still holds its first lease, so it waited no lease out.
// In every way of waiting: notified, polling, fair, ObtainMulti, quorum.
func TestWaitLimitIsACap(t *testing.T) {
	t.Parallel()
	const lease = 5 * time.Second // the holder's, and the TTL the waiter asks for
	const limit = 100 * time.Millisecond
	srv := redistest.Start(t)
	q := startQuorum(t, 3)
	retry := redislock.WithRetry(redislock.LinearBackoff(20 * time.Millisecond))
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) *redislock.Client
		obtain func(c *redislock.Client, key string) error
	}{
		{"notified", func(t *testing.T) *redislock.Client { return newClient(t, srv.Client(nil)) }, nil},
		{"polling", func(t *testing.T) *redislock.Client {
			return newClient(t, srv.Client(nil), redislock.WithNotify(false))
		}, nil},
		{"fair", func(t *testing.T) *redislock.Client { return newClient(t, srv.Client(nil), redislock.WithFair(true)) }, nil},
		{"multi", func(t *testing.T) *redislock.Client { return newClient(t, srv.Client(nil)) },
			func(c *redislock.Client, key string) error {
				m, err := c.ObtainMulti(context.Background(), []string{key, key + "-other"}, lease, retry, redislock.WithMaxWait(limit))
				if err == nil {
					_ = m.Release(context.Background())
				}
				return err
			}},
		{"quorum", func(t *testing.T) *redislock.Client { return q.client(t) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testkit.Context(t)
			holder, waiter := tc.client(t), tc.client(t)
			key := "capped-" + tc.name
			h, err := holder.Obtain(ctx, key, lease)
			require.NoError(t, err)
			obtain := tc.obtain
			if obtain == nil {
				obtain = func(c *redislock.Client, key string) error {
					l, err := c.Obtain(context.Background(), key, lease, retry, redislock.WithMaxWait(limit))
					if err == nil {
						_ = l.Release(context.Background())
					}
					return err
				}
			}
			err = obtain(waiter, key)
			var wl *redislock.WaitLimitError
			require.ErrorAs(t, err, &wl, "the waiter did not stop at its wait limit")
			assert.ErrorIs(t, err, redislock.ErrNotObtained)
			assert.Equal(t, limit, wl.Limit)
			assert.Greater(t, wl.TTL, limit, "the lease seen at the limit")
			left, err := h.TTL(ctx)
			require.NoError(t, err, "the holder's first lease ended before the waiter returned")
			assert.Positive(t, left)
			require.NoError(t, h.Release(ctx))
		})
	}
}

// At the wait limit, the error says so, matches ErrNotObtained and carries
// the remaining TTL seen: for a lease longer than the TTL asked for, and
// for a holder that renews a lease shorter than it.
func TestWaitLimitError(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := testkit.Context(t)
	check := func(err error, ttlAbove time.Duration) {
		t.Helper()
		var wl *redislock.WaitLimitError
		require.ErrorIs(t, err, redislock.ErrNotObtained, "Obtain, want a *WaitLimitError matching ErrNotObtained with the TTL seen")
		require.ErrorAs(t, err, &wl, "Obtain, want a *WaitLimitError matching ErrNotObtained with the TTL seen")
		require.Equal(t, 50*time.Millisecond, wl.Limit, "Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the TTL seen", err, err)
		require.Greater(t, wl.TTL, ttlAbove, "Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the TTL seen", err, err)
	}
	_, err := c.Obtain(ctx, "long", time.Minute)
	require.NoError(t, err)
	_, err = c.Obtain(context.Background(), "long", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	check(err, 30*time.Second)

	renewed := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		renewed <- c.Run(ctx, "renewed", time.Second, func(ctx context.Context, l *redislock.Lock) error {
			<-stop
			return nil
		})
	}()
	require.Eventually(t, func() bool { return srv.Client(nil).Exists(ctx, redislock.DefaultPrefix+"{renewed}").Val() == 1 }, 5*time.Second, 5*time.Millisecond, "the holder")
	_, err = c.Obtain(context.Background(), "renewed", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	close(stop)
	check(err, 0)
	require.NoError(t, <-renewed)
}

// In quorum mode the error carries the longest remaining lease among the
// nodes that answered "held".
func TestQuorumWaitLimitError(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	_, err := c.Obtain(ctx, "qlong", time.Minute)
	require.NoError(t, err)
	_, err = c.Obtain(context.Background(), "qlong", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	var wl *redislock.WaitLimitError
	require.ErrorIs(t, err, redislock.ErrNotObtained, "Obtain, want a *WaitLimitError with the TTL seen")
	require.ErrorAs(t, err, &wl, "Obtain, want a *WaitLimitError with the TTL seen")
	require.Greater(t, wl.TTL, 30*time.Second, "Obtain = %v, want a *WaitLimitError with the TTL seen", err)
}
