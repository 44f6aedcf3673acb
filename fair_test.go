package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/require"
)

func queueLen(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), redislock.LockKey(key)+":queue").Result()
	require.NoError(t, err)
	return n
}

// TestFairOrder: waiters arrive one after another, each on its own Client
// (as separate processes would), while the lock is held; they must be
// granted in arrival order, notified or polling.
func TestFairOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		for _, notify := range []bool{true, false} {
			t.Run(fmt.Sprintf("notify=%v", notify), func(t *testing.T) {
				const waiters = 8
				key := t.Name()
				opts := []redislock.ClientOption{redislock.WithFair(true), redislock.WithNotify(notify)}
				order := fairOrder(t, b.rdb, key, waiters, opts...)
				want := make([]int, waiters)
				for i := range want {
					want[i] = i
				}
				require.True(t, slices.Equal(order, want), "granted in order %v, want arrival order %v", order, want)
				require.Equal(t, int64(0), queueLen(t, b.rdb, key), "entries left in the queue")
			})
		}
	})
}

// fairOrder holds key, lets waiters waiters arrive one after another, each
// on its own Client made with opts (as separate processes would) and
// queued before the next comes, releases the lock and returns the order
// in which the waiters were granted it.
func fairOrder(t *testing.T, rdb redis.UniversalClient, key string, waiters int, opts ...redislock.ClientOption) []int {
	t.Helper()
	holder, err := newClient(t, rdb, opts...).Obtain(testkit.Context(t), key, 10*time.Second)
	require.NoError(t, err)
	ctx := testkit.Context(t)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		c := newClient(t, rdb, opts...)
		wg.Go(func() {
			l, err := c.Obtain(ctx, key, 10*time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			errs <- l.Release(ctx)
		})
		// The next one arrives after this one is queued.
		require.Eventually(t, func() bool { return queueLen(t, rdb, key) == int64(i+1) }, 5*time.Second, 5*time.Millisecond, "waiter queued")
	}
	require.NoError(t, holder.Release(ctx))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return order
}

// TestFairWaiterLeaves: a waiter whose ctx ends leaves the queue at once;
// a waiter that died (its entry left behind) holds up the queue only until
// its entry expires, and not less.
func TestFairWaiterLeaves(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		key := t.Name()
		opts := []redislock.ClientOption{redislock.WithFair(true), redislock.WithQueueTTL(300 * time.Millisecond)}
		c := newClient(t, b.rdb, opts...)
		holder, err := c.Obtain(testkit.Context(t), key, 10*time.Second)
		require.NoError(t, err)
		// A single try (NoRetry) that finds the lock held leaves no entry.
		if _, err := c.Obtain(testkit.Context(t), key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			require.Fail(t, fmt.Sprintf("Obtain on a held fair lock: %v", err))
		}
		require.Equal(t, int64(0), queueLen(t, b.rdb, key), "a failed single try left queue entries")
		// A cancelled waiter leaves no entry.
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Obtain(cctx, key, time.Second, redislock.WithRetry(redislock.LinearBackoff(50*time.Millisecond)))
			done <- err
		}()
		require.Eventually(t, func() bool { return queueLen(t, b.rdb, key) == 1 }, 5*time.Second, 5*time.Millisecond, "waiter queued")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled, "cancelled waiter")
		require.Equal(t, int64(0), queueLen(t, b.rdb, key), "cancelled waiter left entries")
		// A dead waiter's entry at the head, valid for 1 s of server time.
		now, err := b.rdb.Time(context.Background()).Result()
		require.NoError(t, err)
		deadline := now.Add(time.Second)
		// As a waiter's own attempts leave them, the queue keys outlive the
		// entry: else they expire with the live waiter's queue TTL (300 ms)
		// and take the dead entry with them when that waiter is late.
		for _, k := range []string{"queue", "qexp"} {
			qk := redislock.LockKey(key) + ":" + k
			score := 1.0
			if k == "qexp" {
				score = float64(deadline.UnixMilli())
			}
			require.NoError(t, b.rdb.ZAdd(context.Background(), qk, redis.Z{Score: score, Member: "dead"}).Err())
			require.NoError(t, b.rdb.PExpireAt(context.Background(), qk, deadline).Err())
		}
		require.NoError(t, holder.Release(context.Background()))
		l, err := c.Obtain(testkit.Context(t), key, time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		require.NoError(t, err, "the queue stayed blocked after the dead entry expired")
		defer l.Release(context.Background())
		after, err := b.rdb.Time(context.Background()).Result()
		require.NoError(t, err)
		require.False(t, after.Before(deadline), "granted at %v, before the dead head's entry expired at %v: the queue was overtaken", after, deadline)
	})
}

// TestFairInvalid: quorum mode (by NewQuorum, and per call) and bad queue
// TTLs are refused.
func TestFairInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	_, err := c.Obtain(testkit.Context(t), "k", time.Second, redislock.WithQueueTTL(time.Millisecond))
	require.ErrorIs(t, err, redislock.ErrInvalidArgument, "WithQueueTTL(1ms)")
	rdb2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	t.Cleanup(func() { _ = rdb2.Close() })
	q, err := redislock.NewQuorum([]redis.UniversalClient{rdb, rdb2}, redislock.WithFair(true))
	require.ErrorIs(t, err, redislock.ErrInvalidArgument, "fair NewQuorum: %v", q)
	require.Nil(t, q, "fair NewQuorum, %v", err)
	q, err = redislock.NewQuorum([]redis.UniversalClient{rdb, rdb2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = q.Obtain(testkit.Context(t), "k", time.Second, redislock.WithFair(true))
	require.ErrorIs(t, err, redislock.ErrInvalidArgument, "fair quorum Obtain")
}

// An attempt still in flight when its waiter's ctx ends is abandoned, and
// may reach Redis after the call has left the queue (a command on the wire
// overtaken by the leave on another connection) and queue the ticket: its
// settle takes the ticket out again, long before the queue TTL would.
func TestFairAbandonedAttemptLeaves(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		key := t.Name()
		hook := &lateScript{}
		b.rdb.AddHook(hook)
		c := newClient(t, b.rdb, redislock.WithFair(true), redislock.WithQueueTTL(time.Minute))
		holder, err := c.Obtain(testkit.Context(t), key, time.Minute)
		require.NoError(t, err)
		hook.entered, hook.proceed, hook.ran = make(chan struct{}), make(chan struct{}), make(chan struct{})
		hook.armed.Store(true) // the waiter's first attempt
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Obtain(cctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(50*time.Millisecond)))
			done <- err
		}()
		<-hook.entered
		cancel()
		require.ErrorIs(t, <-done, context.Canceled, "cancelled waiter")
		close(hook.proceed) // the abandoned attempt reaches Redis now, and queues the ticket
		<-hook.ran
		require.Eventually(t, func() bool { return queueLen(t, b.rdb, key) == 0 }, 10*time.Second, 5*time.Millisecond, "the abandoned attempt's ticket out of the queue")
		require.NoError(t, holder.Release(context.Background()))
	})
}

// lateScript holds its client's next script call, once armed, until
// proceed is closed, then sends it whatever became of the caller's ctx (a
// command already on the wire when the caller gave up) and closes ran.
type lateScript struct {
	armed                 atomic.Bool
	entered, proceed, ran chan struct{}
}

func (h *lateScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := strings.ToLower(cmd.Name()); (n == "evalsha" || n == "eval") && h.armed.CompareAndSwap(true, false) {
			close(h.entered)
			<-h.proceed
			defer close(h.ran)
			return next(context.WithoutCancel(ctx), cmd)
		}
		return next(ctx, cmd)
	}
}

func (h *lateScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
