package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/semaphore"
)

// Contended fair locks and a semaphore's queue work with nothing but the
// documented privileges: queueing, renewing a place, leaving the queue and
// granting its head call only the commands the README lists.
func TestACLQueues(t *testing.T) {
	srv := redistest.Start(t)
	aclUser(t, srv, "locker", "pw", aclRules)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	retry := redislock.WithRetry(redislock.LinearBackoff(20 * time.Millisecond))
	queued := func(key string, n int64) func() bool {
		return func() bool {
			r, err := srv.Do("ZCARD", key)
			require.NoError(t, err)
			return r == n
		}
	}

	a := redislock.New(userClient(t, srv, "locker", "pw"), redislock.WithFair(true))
	defer a.Close()
	// A minute's queue TTL: a waiter's place lapses only if it is not taken
	// out of the queue.
	b := redislock.New(userClient(t, srv, "locker", "pw"), redislock.WithFair(true), redislock.WithQueueTTL(time.Minute))
	defer b.Close()
	l, err := a.Obtain(ctx, "fq", time.Minute)
	require.NoError(t, err)
	// A waiter that gives up leaves the queue.
	wctx, wcancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { _, err := b.Obtain(wctx, "fq", time.Minute, retry); left <- err }()
	redistest.Eventually(t, 10*time.Second, "the fair waiter queued", queued("redislock:{fq}:queue", 1))
	wcancel()
	require.ErrorIs(t, <-left, context.Canceled)
	redistest.Eventually(t, 10*time.Second, "the fair waiter left", queued("redislock:{fq}:queue", 0))
	n, err := srv.Do("EXISTS", "redislock:{fq}:qexp")
	require.NoError(t, err)
	require.Equal(t, int64(0), n, "the queue's deadlines outlive its last waiter")
	// A waiter at the head of the queue is granted the lock.
	got := make(chan error, 1)
	go func() {
		wl, err := b.Obtain(ctx, "fq", time.Minute, retry)
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	redistest.Eventually(t, 10*time.Second, "the fair waiter queued", queued("redislock:{fq}:queue", 1))
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-got, "fair waiter under the ACL")

	s, err := semaphore.New(userClient(t, srv, "locker", "pw"), "acl", 1)
	require.NoError(t, err)
	defer s.Close()
	p, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	go func() {
		wp, err := s.Acquire(ctx, time.Minute)
		if err == nil {
			err = wp.Release(ctx)
		}
		got <- err
	}()
	redistest.Eventually(t, 10*time.Second, "the semaphore waiter queued", func() bool {
		info, err := s.Inspect(ctx)
		require.NoError(t, err)
		return info.Waiters == 1
	})
	require.NoError(t, p.Release(ctx))
	require.NoError(t, <-got, "semaphore waiter under the ACL")
}
