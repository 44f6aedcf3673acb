package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// Inspect counts the waiters it can know of: a waiter of another Client
// (it marked the grant), this Client's own waiters, and the fair queue.
func TestInspectWaiters(t *testing.T) {
	srv := redistest.Start(t)
	starts := newWaitStarts()
	holder, others := newClient(t, srv.Client(nil)), newClient(t, srv.Client(nil), redislock.WithObserver(starts))
	ctx := ctxT(t, 20*time.Second)
	waiters := func(c *redislock.Client, key string) int {
		info, err := c.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
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
			if err != nil {
				t.Fatal(err)
			}
			if n := waiters(holder, key); n != 0 {
				t.Fatalf("Waiters = %d before anyone waits", n)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 2)
			for range 2 {
				go func() {
					_, err := others.Obtain(wctx, key, time.Second, append(tc.opts, redislock.WithRetry(redislock.LinearBackoff(time.Second)))...)
					done <- err
				}()
			}
			eventually(t, 10*time.Second, "the holder's Client sees a waiter", func() bool { return waiters(holder, key) >= 1 })
			eventually(t, 10*time.Second, "the waiters' Client counts both", func() bool { return waiters(others, key) == 2 })
			// Both found the lock held (a fair waiter is counted from its
			// attempt's run on Redis, before its reply came back): their
			// ctx ends a wait.
			starts.await(t, 2)
			cancel()
			for range 2 {
				if err := <-done; !errors.Is(err, redislock.ErrNotObtained) {
					t.Fatalf("waiter: %v", err)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "no waiter after they left", func() bool { return waiters(others, key) == 0 })
		})
	}
}

// The fair queue counts every Client's waiter, where a mark says only that
// someone waits.
func TestInspectFairQueue(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv.Client(nil))
	ctx := ctxT(t, 20*time.Second)
	fair := redislock.WithFair(true)
	l, err := holder.Obtain(ctx, "queue", 10*time.Second, fair)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range 2 {
		c := newClient(t, srv.Client(nil))
		go func() {
			_, _ = c.Obtain(wctx, "queue", time.Second, fair, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		}()
	}
	eventually(t, 10*time.Second, "two queued waiters", func() bool {
		info, err := holder.Inspect(ctx, "queue")
		return err == nil && info.Waiters == 2
	})
	cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
