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
)

func queueLen(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), redislock.LockKey(key)+":queue").Result()
	if err != nil {
		t.Fatal(err)
	}
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
				if !slices.Equal(order, want) {
					t.Fatalf("granted in order %v, want arrival order %v", order, want)
				}
				if n := queueLen(t, b.rdb, key); n != 0 {
					t.Fatalf("%d entries left in the queue", n)
				}
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
	holder, err := newClient(t, rdb, opts...).Obtain(ctxT(t, 10*time.Second), key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
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
		eventually(t, 5*time.Second, "waiter queued", func() bool { return queueLen(t, rdb, key) == int64(i+1) })
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
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
		holder, err := c.Obtain(ctxT(t, 10*time.Second), key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// A single try (NoRetry) that finds the lock held leaves no entry.
		if _, err := c.Obtain(ctxT(t, 10*time.Second), key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Obtain on a held fair lock: %v", err)
		}
		if n := queueLen(t, b.rdb, key); n != 0 {
			t.Fatalf("a failed single try left %d queue entries", n)
		}
		// A cancelled waiter leaves no entry.
		cctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Obtain(cctx, key, time.Second, redislock.WithRetry(redislock.LinearBackoff(50*time.Millisecond)))
			done <- err
		}()
		eventually(t, 5*time.Second, "waiter queued", func() bool { return queueLen(t, b.rdb, key) == 1 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		if n := queueLen(t, b.rdb, key); n != 0 {
			t.Fatalf("cancelled waiter left %d entries", n)
		}
		// A dead waiter's entry at the head, valid for 1 s of server time.
		now, err := b.rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
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
			if err := b.rdb.ZAdd(context.Background(), qk, redis.Z{Score: score, Member: "dead"}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := b.rdb.PExpireAt(context.Background(), qk, deadline).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		l, err := c.Obtain(ctxT(t, 10*time.Second), key, time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		if err != nil {
			t.Fatalf("the queue stayed blocked after the dead entry expired: %v", err)
		}
		defer l.Release(context.Background())
		after, err := b.rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if after.Before(deadline) {
			t.Fatalf("granted at %v, before the dead head's entry expired at %v: the queue was overtaken", after, deadline)
		}
	})
}

// TestFairInvalid: quorum mode (by NewQuorum, and per call) and bad queue
// TTLs are refused.
func TestFairInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	if _, err := c.Obtain(ctxT(t, 10*time.Second), "k", time.Second, redislock.WithQueueTTL(time.Millisecond)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Fatalf("WithQueueTTL(1ms): %v", err)
	}
	rdb2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	t.Cleanup(func() { _ = rdb2.Close() })
	if q, err := redislock.NewQuorum([]redis.UniversalClient{rdb, rdb2}, redislock.WithFair(true)); !errors.Is(err, redislock.ErrInvalidArgument) || q != nil {
		t.Fatalf("fair NewQuorum: %v, %v", q, err)
	}
	q, err := redislock.NewQuorum([]redis.UniversalClient{rdb, rdb2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, err := q.Obtain(ctxT(t, 10*time.Second), "k", time.Second, redislock.WithFair(true)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Fatalf("fair quorum Obtain: %v", err)
	}
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
		holder, err := c.Obtain(ctxT(t, 10*time.Second), key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
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
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		close(hook.proceed) // the abandoned attempt reaches Redis now, and queues the ticket
		<-hook.ran
		eventually(t, 10*time.Second, "the abandoned attempt's ticket out of the queue", func() bool { return queueLen(t, b.rdb, key) == 0 })
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
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
