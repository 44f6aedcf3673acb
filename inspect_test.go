package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/require"
)

// Inspect counts the waiters it can know of: a waiter of another Client
// (it marked the grant), this Client's own waiters, and the fair queue.
func TestInspectWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	starts := newWaitStarts()
	holder, others := newClient(t, srv.Client(nil)), newClient(t, srv.Client(nil), redislock.WithObserver(starts))
	ctx := testkit.Context(t)
	waiters := func(c *redislock.Client, key string) int {
		info, err := c.Inspect(ctx, key)
		require.NoError(t, err)
		return info.Waiters
	}
	for _, tc := range []struct {
		name string
		opts []redislock.Option
	}{
		{"notified", nil},
		{"fair", []redislock.Option{redislock.WithFair(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "inspect-" + tc.name
			l, err := holder.Obtain(ctx, key, 10*time.Second, tc.opts...)
			require.NoError(t, err)
			require.Equal(t, 0, waiters(holder, key), "Waiters before anyone waits")
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 2)
			for range 2 {
				go func() {
					_, err := others.Obtain(wctx, key, time.Second, append(tc.opts, redislock.WithRetry(redislock.LinearBackoff(time.Second)))...)
					done <- err
				}()
			}
			require.Eventually(t, func() bool { return waiters(holder, key) >= 1 }, 10*time.Second, 5*time.Millisecond, "the holder's Client sees a waiter")
			require.Eventually(t, func() bool { return waiters(others, key) == 2 }, 10*time.Second, 5*time.Millisecond, "the waiters' Client counts both")
			// Both found the lock held (a fair waiter is counted from its
			// attempt's run on Redis, before its reply came back): their
			// ctx ends a wait.
			for range 2 {
				testkit.Recv(t, starts.ch, "WaitStart")
			}
			cancel()
			for range 2 {
				require.ErrorIs(t, <-done, redislock.ErrNotObtained, "waiter")
			}
			require.NoError(t, l.Release(ctx))
			require.Eventually(t, func() bool { return waiters(others, key) == 0 }, 10*time.Second, 5*time.Millisecond, "no waiter after they left")
		})
	}
}

// The fair queue counts every Client's waiter, where a mark says only that
// someone waits.
func TestInspectFairQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder := newClient(t, srv.Client(nil))
	ctx := testkit.Context(t)
	fair := redislock.WithFair(true)
	l, err := holder.Obtain(ctx, "queue", 10*time.Second, fair)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range 2 {
		c := newClient(t, srv.Client(nil))
		go func() {
			_, _ = c.Obtain(wctx, "queue", time.Second, fair, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		}()
	}
	require.Eventually(t, func() bool {
		info, err := holder.Inspect(ctx, "queue")
		return err == nil && info.Waiters == 2
	}, 10*time.Second, 5*time.Millisecond, "two queued waiters")
	cancel()
	require.NoError(t, l.Release(ctx))
}
